// The job result document (client/result_json.h), built in-process from libpclient's structs: the
// keys pbench's --json, its report and the Python client all show.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "client/figures.h"
#include "client/result_json.h"
#include "core/json_out.h"

using nlohmann::json;

namespace {

pclient::Job small_job() {
  pclient::Job job;
  job.rows = 100;
  job.cols = 50;
  job.chunk_rows = 10;
  job.chunk_cols = 50;
  job.generator = "arange";
  return job;
}

pclient::WorkerInfo worker(uint32_t id, const char* name, uint64_t chunks_done, double busy_seconds) {
  pclient::WorkerInfo w;
  w.id = id;
  w.name = name;
  w.host = "node";
  w.backend = "cpu";
  w.threads = 2;
  w.chunks_done = chunks_done;
  w.busy_seconds = busy_seconds;
  return w;
}

// Two workers, the second a straggler, one mismatched chunk found by verify.
pclient::Result two_worker_result() {
  pclient::Result r;
  r.job_id = 7;
  r.sum = 1234.5;
  r.exact_terms = {1234.5};
  r.count = 1250;
  r.min = 1;
  r.max = 2500;
  r.chunks = 10;
  r.workers = 2;
  r.scheduler_seconds = 2;
  r.wall_seconds = 2;
  pclient::DeviceReport fast, slow;
  fast.worker_id = 1;
  fast.name = "fast";
  fast.chunks = 8;
  fast.bytes = 32000;
  fast.bytes_per_second = 32000;
  slow.worker_id = 2;
  slow.name = "slow";
  slow.host = "node";
  slow.chunks = 2;
  slow.bytes = 8000;
  slow.bytes_per_second = 4000;
  slow.slow = true;
  slow.cause = "throttled: hw_slowdown";
  slow.has_gpu = true;
  slow.series = {{0.5, 1500, 70, 300, 99}};
  r.devices = {fast, slow};
  r.verified_chunks = 10;
  r.mismatch_count = 1;
  pclient::VerifyMismatch m;
  m.chunk = 3;
  m.copies = {{1, "fast", "cpu", 10, 5, 1, 2, false, {10}}, {2, "slow", "cpu", 11, 5, 1, 2, true, {11}}};
  r.mismatches = {m};
  return r;
}

}  // namespace

TEST_CASE("a job result written as text is the document result_json builds", "[json]") {
  const pclient::Job job = small_job();
  const pclient::Result r = two_worker_result();
  const std::vector<pclient::WorkerInfo> before = {worker(1, "fast", 4, 1.0), worker(2, "slow", 0, 0)};
  const std::vector<pclient::WorkerInfo> after = {worker(1, "fast", 12, 3.0), worker(2, "slow", 2, 4.0)};
  const pclient::ResultJsonInput in{
      .job = job, .result = r, .seconds = 2, .before = &before, .after = &after, .verify = true};
  psched::JsonText text;
  pclient::write_result_json(text, in);
  const json doc = pclient::result_json(in);
  CHECK(json::parse(text.text()) == doc);

  CHECK(doc["job_id"] == 7);
  CHECK(doc["mean"] == 1234.5 / 1250);
  CHECK(doc["bytes"] == 40000);
  CHECK(doc["bytes_per_second"] == 20000.0);
  CHECK(doc["generator"] == "arange");
  CHECK(doc["input"] == nullptr);
  CHECK(doc["cluster_workers"] == 2);
  REQUIRE(doc["devices"].size() == 2);
  const json& fast = doc["devices"][0];
  CHECK(fast["name"] == "fast");
  CHECK(fast["run_chunks"] == 8);
  CHECK(fast["run_busy_seconds"] == 2.0);
  CHECK(fast["run_busy_fraction"] == 0.5);  // 2 s busy over 2 s of wall time and 2 threads
  CHECK(fast["run"]["worker"] == "fast");
  CHECK(fast["run"]["busy_share"] == 0.5);  // 1 device second of the job's 2
  CHECK(fast["run"]["gpu"] == nullptr);
  CHECK_FALSE(doc["devices"][1]["run"]["gpu"].contains("series"));  // only when asked
  CHECK(doc["stragglers"] == json::array({{{"worker", "slow"}, {"host", "node"}, {"cause", "throttled: hw_slowdown"}}}));
  const json& copy = doc["verify"]["mismatches"][0]["copies"][1];
  CHECK(copy["worker_id"] == 2);
  CHECK(copy["worker"] == "slow");
  CHECK(copy["suspect"] == true);
  CHECK(copy["exact_terms"] == json::array({11.0}));
  CHECK(copy.size() == 9);
  CHECK_FALSE(doc.contains("var"));  // no squares: no var, std or ddof
  CHECK_FALSE(doc.contains("ddof"));
}

namespace {

// The result of a var/std job over 1, 2, 3, 4.
pclient::Result one_to_four() {
  pclient::Result r;
  r.has_squares = true;
  r.count = 4;
  r.sum = 10;
  r.min = 1;
  r.max = 4;
  r.exact_terms = {10};
  r.squares_terms = {30};
  return r;
}

}  // namespace

TEST_CASE("a job result has var, std and ddof when the job computed squares, and null mean when empty", "[json]") {
  const pclient::Job job = small_job();
  const pclient::Result r = one_to_four();
  json doc = pclient::result_json({.job = job, .result = r, .seconds = 1, .ddof = 1});
  CHECK(doc["var"] == r.var(1));
  CHECK(doc["std"] == r.std(1));
  CHECK(doc["ddof"] == 1);
  CHECK(doc["devices"] == json::array());  // no workers given
  CHECK_FALSE(doc.contains("verify"));
  CHECK_FALSE(doc.contains("empty_selection"));

  pclient::Result empty;
  doc = pclient::result_json({.job = job, .result = empty, .seconds = 1});
  CHECK(doc["mean"] == nullptr);
  CHECK(doc["empty_selection"] == true);
}

TEST_CASE("every figure of client/figures.h is a key of the job result with the table's value", "[json]") {
  const pclient::Job job = small_job();
  const pclient::Result r = one_to_four();  // var 1.25 (ddof 0), std sqrt(1.25)
  const json doc = pclient::result_json({.job = job, .result = r, .seconds = 1});
  for (const pclient::FigureDef& f : pclient::kFigures) {
    INFO(f.name);
    REQUIRE(doc.contains(f.name));
    CHECK(doc[std::string(f.name)].get<double>() == f.value(r, 0));
  }
  CHECK(pclient::find_figure("var")->value(r, 0) == 1.25);
  CHECK(pclient::find_figure("std")->value(r, 0) == std::sqrt(1.25));
  CHECK(pclient::find_figure("mean")->value(r, 0) == 2.5);
  CHECK(pclient::find_figure("median") == nullptr);
}
