// Exact var and std end to end (issue 45): a job that asks for them (Job::squares) gets the exact
// sum of squares from every worker, and its var and std have the same bits for every chunking,
// worker count, CPU kernel build and a worker killed mid-job; arange's match the closed form
// step^2 n (n^2 - 1) / (12 (n - ddof)) bit for bit; pbench prints them and a sum-only job is as before.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// normal(11, 1), the DeepOps array's mean and spread (ragged_normal_job's selection), with squares.
pclient::Job normal_job(uint64_t chunk_rows, uint64_t chunk_cols) {
  pclient::Job j = ragged_normal_job(chunk_rows, chunk_cols, 4545);
  j.param0 = 11;
  j.squares = true;
  return j;
}

struct Stats {
  uint64_t var0, var1, std0, std1;
  bool operator==(const Stats&) const = default;
};

Stats stats_of(const pclient::Result& r) {
  return {bits(r.var(0)), bits(r.var(1)), bits(r.std(0)), bits(r.std(1))};
}

}  // namespace

TEST_CASE("var and std of arange match the closed form bit for bit in every chunking", "[variance]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  // 400 x 300 elements 2^40 + 3 i (a huge mean, a spread of 3): n = 120000, so var =
  // 9 (n^2 - 1) / 12 with ddof 0 and 9 n (n + 1) / 12 with ddof 1, both exact in doubles.
  const double n = 120000;
  for (const auto& [cr, cc] : std::vector<std::pair<uint64_t, uint64_t>>{{400, 300}, {33, 29}, {1, 300}, {400, 1}}) {
    pclient::Job j = arange_job(400, 300, cr, cc, 1, 1);
    j.param0 = 1099511627776.0;
    j.param1 = 3;
    j.squares = true;
    const pclient::Result r = client.run(j);
    INFO(cr << "x" << cc);
    REQUIRE(r.has_squares);
    CHECK(bits(r.var(0)) == bits(9 * (n * n - 1) / 12));
    CHECK(bits(r.var(1)) == bits(9 * n * (n + 1) / 12));
    CHECK(bits(r.std(0)) == bits(std::sqrt(9 * (n * n - 1) / 12)));  // an exact var: sqrt rounds it once
  }
}

TEST_CASE("var and std of a normal job have the same bits for every chunking, worker count and kernel build",
          "[variance]") {
  Stats want;
  {
    TestCluster cluster;
    cluster.add_worker({.threads = 1});
    cluster.wait_for_workers(1);
    const pclient::Result r = cluster.client().run(normal_job(300, 500));
    want = stats_of(r);
    CHECK(r.var(0) > 0.9);  // normal(11, 1): var near 1
    CHECK(r.var(0) < 1.1);
  }
  for (int workers : {1, 3}) {
    TestCluster cluster;
    for (int i = 0; i < workers; ++i) cluster.add_worker({.threads = 1});
    cluster.wait_for_workers(size_t(workers));
    pclient::Client client = cluster.client();
    for (const auto& [cr, cc] : kRaggedChunkings) {
      INFO(workers << " workers, chunks " << cr << "x" << cc);
      CHECK(stats_of(client.run(normal_job(cr, cc))) == want);
    }
  }
  for (const char* isa : {"baseline", "avx2", "avx512"}) {
    TestCluster cluster;
    cluster.add_worker({.threads = 2, .env = {{"PSCHED_CPU_KERNELS", isa}}});
    cluster.wait_for_workers(1);
    INFO(isa);
    CHECK(stats_of(cluster.client().run(normal_job(37, 53))) == want);
  }
  {
    bool killed = false;
    const pclient::Result r = run_with_a_worker_killed(normal_job(30, 50), killed);  // 100 chunks
    REQUIRE(killed);
    CHECK(r.retries >= 1);
    CHECK(stats_of(r) == want);
  }
}

TEST_CASE("a sum-only job carries no sum of squares", "[variance]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  pclient::Job j = normal_job(100, 100);
  j.squares = false;
  const pclient::Result r = cluster.client().run(j);
  CHECK_FALSE(r.has_squares);
  CHECK_THROWS_AS(r.var(), pclient::Error);
}

TEST_CASE("pbench --stats sum,var,std prints Var and Std lines and JSON keys, with --ddof", "[variance][pbench]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2});
  cluster.wait_for_workers(1);
  const std::string pbench = bin_dir() + "/pbench";
  const std::vector<std::string> job = {pbench, "-d", "--scheduler", cluster.address(), "-x", "400", "-y", "300",
                                        "--chunk-x", "33", "--chunk-y", "29", "--generator", "arange",
                                        "--row-step", "1", "--col-step", "1", "-q"};
  // arange 0..119999 (+1): var = (n^2 - 1) / 12 with ddof 0, n (n + 1) / 12 with ddof 1.
  const double n = 120000;
  std::string out;
  std::vector<std::string> argv = job;
  argv.insert(argv.end(), {"--stats", "sum,var,std"});
  REQUIRE(WEXITSTATUS(run_command(argv, &out)) == 0);
  INFO(out);
  char line[128];
  std::snprintf(line, sizeof line, "Var: %.17g  (ddof 0)", (n * n - 1) / 12);
  CHECK(out.find(line) != std::string::npos);
  CHECK(out.find("Std: ") != std::string::npos);

  argv = job;
  argv.insert(argv.end(), {"--stats", "var", "--ddof", "1", "--json"});
  REQUIRE(WEXITSTATUS(run_command(argv, &out)) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(bits(j["var"].get<double>()) == bits(n * (n + 1) / 12));
  CHECK(j["ddof"] == 1);
  CHECK(j.contains("std"));  // the job computed the squares: var, std and ddof come together

  REQUIRE(WEXITSTATUS(run_command(job, &out)) == 0);  // the default: today's lines, no Var or Std
  CHECK(out.find("Var:") == std::string::npos);
  CHECK(out.find("Std:") == std::string::npos);
  argv = job;
  argv.insert(argv.end(), {"--stats", "median"});
  CHECK(WEXITSTATUS(run_command(argv, &out)) != 0);
}
