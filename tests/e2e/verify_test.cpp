// Verify (pbench --verify, RunOptions::verify) with real daemons: a worker made to flip the last bit
// of one chunk's partial (the test-only PSCHED_TEST_FLIP_CHUNK) is named with that chunk, pbench
// exits 1 and /metrics counts it; with no fault every chunk is compared and the result is exact; a
// fraction draws the same chunks every run; a worker killed mid-job changes nothing.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <csignal>
#include <set>

#include <nlohmann/json.hpp>

#include "dashboard/http_probe.h"
#include "scheduler/verify.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

std::vector<std::string> pbench_verify(const TestCluster& cluster, const std::string& fraction) {
  return {bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "-x", "200", "-y", "200",
          "--chunk-x", "20", "--chunk-y", "20", "--generator", "arange", "--row-step", "1",
          "--col-step", "1", "--check", "--json", "--verify", fraction};
}

pclient::RunOptions verifying(double fraction) {
  pclient::RunOptions o;
  o.verify = fraction;
  return o;
}

}  // namespace

TEST_CASE("pbench --verify with no fault compares every chunk, finds no mismatch and exits 0", "[verify]") {
  TestCluster cluster;
  for (int i = 0; i < 3; ++i) cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(3);
  std::string out;
  const int status = run_command(pbench_verify(cluster, "1.0"), &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["check"] == "ok");
  CHECK(j["verify"]["verified_chunks"] == 100);
  CHECK(j["verify"]["same_worker_chunks"] == 0);
  CHECK(j["verify"]["mismatch_count"] == 0);
  CHECK(j["verify"]["mismatches"].empty());
}

TEST_CASE("pbench --verify names the chunk and the worker that flipped its last bit and exits 1", "[verify]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1, .name = "good"});
  cluster.add_worker({.threads = 1, .name = "flipper", .env = {{"PSCHED_TEST_FLIP_CHUNK", "42"}}});
  cluster.wait_for_workers(2);
  std::string out;
  const int status = run_command(pbench_verify(cluster, "1.0"), &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("pbench: verify found 1 chunk whose copies differ") != std::string::npos);
  const auto j = nlohmann::json::parse(out.substr(0, out.find('\n')));
  CHECK(j["check"] == "ok");  // the first copy counts with two workers; chunk 42 came from either
  CHECK(j["verify"]["verified_chunks"] == 100);
  CHECK(j["verify"]["mismatch_count"] == 1);
  REQUIRE(j["verify"]["mismatches"].size() == 1);
  const auto& m = j["verify"]["mismatches"][0];
  CHECK(m["chunk"] == 42);
  REQUIRE(m["copies"].size() == 2);  // no third worker: both are suspects
  std::set<std::string> names;
  for (const auto& c : m["copies"]) {
    names.insert(c["worker"].get<std::string>());
    CHECK(c["suspect"] == true);
  }
  CHECK(names == std::set<std::string>{"good", "flipper"});
}

TEST_CASE("with three workers verify names the one worker that flips a chunk, keeps the majority's "
          "partial and /metrics counts it", "[verify]") {
  TestCluster cluster({.dashboard = "127.0.0.1:0"});
  // The faulty worker is alone when the job starts and slow, so it takes every chunk's first copy;
  // the other two join at the first progress, long before it reaches chunk 99, and check it.
  cluster.add_worker({.threads = 1,
                      .name = "flipper",
                      .env = {{"PSCHED_TEST_FLIP_CHUNK", "99"}, {"PSCHED_TEST_CHUNK_DELAY_MS", "30"}}});
  cluster.wait_for_workers(1);
  const pclient::Job job = arange_job(100, 100, 10, 10);  // 100 chunks
  pclient::RunOptions options = verifying(1.0);
  bool joined = false;
  options.on_progress = [&](const pclient::Progress&) {
    if (joined) return;
    joined = true;
    cluster.add_worker({.threads = 1, .name = "good-a"});
    cluster.add_worker({.threads = 1, .name = "good-b"});
  };
  const pclient::Result r = cluster.client().run(job, options);
  CHECK(check(job, r) == "");  // the majority's partial, not the flipped one
  CHECK(r.verified_chunks == 100);
  CHECK(r.mismatch_count == 1);
  REQUIRE(r.mismatches.size() == 1);
  CHECK(r.mismatches[0].chunk == 99);
  REQUIRE(r.mismatches[0].copies.size() == 3);
  for (const pclient::VerifyCopy& c : r.mismatches[0].copies) {
    INFO(c.worker_name);
    CHECK(c.suspect == (c.worker_name == "flipper"));
    CHECK(c.device_name != "");
  }
  const HttpReply metrics = http_request(port_of(cluster.dashboard()), "GET", "/metrics");
  INFO(metrics.body);
  CHECK(metrics.body.find("\npsched_verify_mismatches_total{worker=\"flipper\"} 1\n") != std::string::npos);
  CHECK(metrics.body.find("psched_verify_mismatches_total{worker=\"good-") == std::string::npos);
  CHECK(metrics.body.find("\npsched_verify_chunks_total 100\n") != std::string::npos);
  const HttpReply status = http_request(port_of(cluster.dashboard()), "GET", "/api/status");
  const auto s = nlohmann::json::parse(status.body);
  CHECK(s["verify"]["mismatches_by_worker"]["flipper"] == 1);
}

TEST_CASE("verify of a fraction compares the seeded draw of chunks, the same every run", "[verify]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Job job = arange_job(400, 100, 10, 10);  // 400 chunks
  job.seed = 11;
  uint64_t drawn = 0;
  for (uint64_t c = 0; c < job.chunks(); ++c) drawn += psched::verify_drawn(job.seed, c, 0.25);
  pclient::Client client = cluster.client();
  const pclient::Result first = client.run(job, verifying(0.25));
  const pclient::Result second = client.run(job, verifying(0.25));
  CHECK(check(job, first) == "");
  CHECK(first.verified_chunks == drawn);
  CHECK(second.verified_chunks == drawn);
  CHECK(drawn > 60);
  CHECK(drawn < 140);
  CHECK(first.mismatch_count == 0);
}

TEST_CASE("verify with a worker killed mid-job still compares every chunk and the result is exact", "[verify]") {
  TestCluster cluster;
  std::vector<pid_t> workers;
  for (int i = 0; i < 3; ++i)
    workers.push_back(cluster.add_worker({.threads = 1, .env = {{"PSCHED_TEST_CHUNK_DELAY_MS", "10"}}}));
  cluster.wait_for_workers(3);
  const pclient::Job job = arange_job(200, 100, 10, 10);  // 200 chunks
  pclient::RunOptions options = verifying(1.0);
  bool killed = false;
  options.on_progress = [&](const pclient::Progress& p) {
    if (killed || p.chunks_done < 50) return;
    killed = true;
    ::kill(workers[1], SIGKILL);
    waitpid(workers[1], nullptr, 0);
    cluster.forget(workers[1]);
  };
  const pclient::Result r = cluster.client().run(job, options);
  REQUIRE(killed);
  CHECK(check(job, r) == "");
  CHECK(r.verified_chunks == 200);
  CHECK(r.mismatch_count == 0);
}

TEST_CASE("pbench --verify outside [0, 1] is refused with one line before anything runs", "[verify]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-c", "1", "-x", "10", "-y", "10", "--verify", "1.5"}, &out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out == "pbench: --verify: verify fraction must be in [0, 1] (got 1.5)\n");
}
