// Verify (pbench --verify, RunOptions::verify) with real daemons: a worker made to flip the last bit
// of one chunk's partial (the test-only PSCHED_TEST_FLIP_CHUNK) is named with that chunk, pbench
// exits 1 and /metrics counts it; one whose squares alone differ (PSCHED_TEST_FLIP_SQUARES_CHUNK)
// too; with no fault every chunk is compared and the result is exact; a fraction draws the same
// chunks every run; a worker killed mid-job changes nothing.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <set>

#include <nlohmann/json.hpp>

#include "dashboard/http_probe.h"
#include "scheduler/verify.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

// 100 chunks of 20 x 20 by default (verify blocks of one chunk); `side` 400 in chunks of 10 x 10
// makes 1600 chunks, compared in blocks of 16.
std::vector<std::string> pbench_verify(const TestCluster& cluster, const std::string& fraction,
                                       const std::string& side = "200", const std::string& chunk = "20") {
  return {bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "-x", side, "-y", side,
          "--chunk-x", chunk, "--chunk-y", chunk, "--generator", "arange", "--row-step", "1",
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
  cluster.add_worker({.threads = 1, .name = "flipper", .env = {{"PSCHED_TEST_FLIP_CHUNK", "1000"}}});
  cluster.wait_for_workers(2);
  std::string out;
  // 1600 chunks compared in blocks of 16: the block of chunks 992 to 1007 differs, and is narrowed
  // down to chunk 1000 by computing halves of it again on both workers.
  const int status = run_command(pbench_verify(cluster, "1.0", "400", "10"), &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out.find("pbench: verify found 1 chunk whose copies differ") != std::string::npos);
  const auto j = nlohmann::json::parse(out.substr(0, out.find('\n')));
  CHECK(j["check"] == "ok");  // the first copy counts with two workers; chunk 1000 came from either
  CHECK(j["verify"]["verified_chunks"] == 1600);
  CHECK(j["verify"]["mismatch_count"] == 1);
  REQUIRE(j["verify"]["mismatches"].size() == 1);
  const auto& m = j["verify"]["mismatches"][0];
  CHECK(m["chunk"] == 1000);
  CHECK(m["chunks"] == 1);
  CHECK(m["note"] == "");  // found down to the chunk
  // The copies' sums may round alike: their exact sums differ, and the log says by how much.
  CHECK(m["copies"][0]["exact_terms"] != m["copies"][1]["exact_terms"]);
  CHECK(!m["copies"][0].contains("squares_terms"));  // a sum-only job computes no squares
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("from the first copy's") != std::string::npos);
  REQUIRE(m["copies"].size() == 2);  // no third worker: both are suspects
  std::set<std::string> names;
  for (const auto& c : m["copies"]) {
    names.insert(c["worker"].get<std::string>());
    CHECK(c["suspect"] == true);
  }
  CHECK(names == std::set<std::string>{"good", "flipper"});
}

TEST_CASE("pbench --verify of a var job finds a chunk whose copies differ in the squares alone "
          "and the scheduler names the squares", "[verify]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1, .name = "good"});
  cluster.add_worker({.threads = 1, .name = "flipper", .env = {{"PSCHED_TEST_FLIP_SQUARES_CHUNK", "1000"}}});
  cluster.wait_for_workers(2);
  std::vector<std::string> args = pbench_verify(cluster, "1.0", "400", "10");
  args.insert(args.end(), {"--stats", "var"});
  std::string out;
  const int status = run_command(args, &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  const auto j = nlohmann::json::parse(out.substr(0, out.find('\n')));
  CHECK(j["verify"]["mismatch_count"] == 1);
  REQUIRE(j["verify"]["mismatches"].size() == 1);
  const auto& m = j["verify"]["mismatches"][0];
  CHECK(m["chunk"] == 1000);  // narrowed down through the squares, the sums all agreeing
  CHECK(m["chunks"] == 1);
  REQUIRE(m["copies"].size() == 2);
  CHECK(m["copies"][0]["exact_terms"] == m["copies"][1]["exact_terms"]);
  // The client sees what differs: each copy's exact sum of squares.
  REQUIRE(m["copies"][0].contains("squares_terms"));
  CHECK(m["copies"][0]["squares_terms"] != m["copies"][1]["squares_terms"]);
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("(exact sum of squares)") != std::string::npos);
  CHECK(log.find("from the first copy's") == std::string::npos);  // the sums do not differ

  // pbench's text names the squares too (the flip is in every job, so a second job finds it again).
  args.erase(std::find(args.begin(), args.end(), "--json"));
  std::string text;
  CHECK(WEXITSTATUS(run_command(args, &text)) == 1);
  INFO(text);
  const size_t line = text.find("Verify mismatch: chunk 1000:");
  REQUIRE(line != std::string::npos);
  const std::string mismatch = text.substr(line, text.find('\n', line) - line);
  CHECK(mismatch.find("(exact sum of squares) [suspect]") != std::string::npos);
  CHECK(mismatch.find("from the first copy's") == std::string::npos);
}

TEST_CASE("with three workers verify names the one worker that flips a chunk, keeps the majority's "
          "partial and /metrics counts it", "[verify]") {
  TestCluster cluster({.dashboard = "127.0.0.1:0"});
  // The faulty worker is alone when the job starts and slow, so it takes every block's first copy;
  // the other two join at the first progress and compute the second and third copies. The odd
  // copy's block (chunks 992 to 1007) is narrowed down to its chunk on the flipper and another.
  cluster.add_worker({.threads = 1,
                      .name = "flipper",
                      .env = {{"PSCHED_TEST_FLIP_CHUNK", "1000"}, {"PSCHED_TEST_CHUNK_DELAY_MS", "1"}}});
  cluster.wait_for_workers(1);
  const pclient::Job job = arange_job(320, 400, 10, 10);  // 1280 chunks of 100: blocks of 16
  REQUIRE(psched::verify_block_chunks(job.chunks(), 100) == 16);
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
  CHECK(r.verified_chunks == 1280);
  CHECK(r.mismatch_count == 1);
  REQUIRE(r.mismatches.size() == 1);
  CHECK(r.mismatches[0].chunk == 1000);
  CHECK(r.mismatches[0].chunks == 1);
  REQUIRE(r.mismatches[0].copies.size() == 2);  // the flipper's copy of chunk 1000, and a good one
  CHECK(r.mismatches[0].copies[0].worker_name == "flipper");
  CHECK(r.mismatches[0].copies[0].sum != r.mismatches[0].copies[1].sum);
  for (const pclient::VerifyCopy& c : r.mismatches[0].copies) {
    INFO(c.worker_name);
    CHECK(c.suspect == (c.worker_name == "flipper"));
    CHECK(c.device_name != "");
  }
  const HttpReply metrics = http_request(port_of(cluster.dashboard()), "GET", "/metrics");
  INFO(metrics.body);
  CHECK(metrics.body.find("\npsched_verify_mismatches_total{worker=\"flipper\"} 1\n") != std::string::npos);
  CHECK(metrics.body.find("psched_verify_mismatches_total{worker=\"good-") == std::string::npos);
  CHECK(metrics.body.find("\npsched_verify_chunks_total 1280\n") != std::string::npos);
  const HttpReply status = http_request(port_of(cluster.dashboard()), "GET", "/api/status");
  const auto s = nlohmann::json::parse(status.body);
  CHECK(s["verify"]["mismatches_by_worker"]["flipper"] == 1);
}

TEST_CASE("verify of a fraction compares the seeded draw of blocks, the same every run", "[verify]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Job job = arange_job(400, 100, 10, 10);  // 400 chunks
  job.seed = 11;
  // Blocks of 4 chunks (400 chunks of 100 elements: at least 64 blocks), drawn by block.
  const uint64_t block = psched::verify_block_chunks(job.chunks(), 100);
  REQUIRE(block == 4);
  uint64_t drawn = 0;
  for (uint64_t c = 0; c < job.chunks(); ++c) drawn += psched::verify_drawn(job.seed, c / block, 0.25);
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
