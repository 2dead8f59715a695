// A stored array one worker cannot read (a file missing or unreadable on its node) must not fail the
// job: the chunk that failed there is retried on another worker (scheduler/top_up.cpp, the retry
// rule), and the sum is exact. Where no worker can read it, the job fails with one line naming the
// file and the reason. The unreadable worker runs as another user (setpriv), so this needs root; CI
// runs as root.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/test_cluster.h"

using namespace psched::test;

namespace {

const std::vector<std::string> kAsNobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};
// 2000 x 1000 in 100 x 100 chunks: 8 CPU slots' worth, so both workers get chunks of each job.
const std::vector<std::string> kShape = {"--generator", "arange", "-x", "2000", "-y", "1000", "--chunk-x", "100",
                                         "--chunk-y", "100"};

// Writes the arange array as a .npy in the cluster's directory (mode 0700: only root reads it).
std::string write_npy(const TestCluster& cluster) {
  const std::string path = cluster.dir() + "/a.npy";
  std::vector<std::string> argv = {bin_dir() + "/pbench"};
  argv.insert(argv.end(), kShape.begin(), kShape.end());
  argv.insert(argv.end(), {"--write-npy", path});
  std::string out;
  REQUIRE(run_command(argv, &out) == 0);
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  return path;
}

TimedRun pbench_on(const TestCluster& cluster, std::vector<std::string> job) {
  std::vector<std::string> argv = {bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "-q", "--json"};
  argv.insert(argv.end(), job.begin(), job.end());
  return run_timed(argv);
}

TimedRun input_job(const TestCluster& cluster, const std::string& path) {
  return pbench_on(cluster, {"--input", path, "--chunk-x", "100", "--chunk-y", "100"});
}

bool can_switch_user() { return geteuid() == 0 && access(kAsNobody.front().c_str(), X_OK) == 0; }

}  // namespace

TEST_CASE("a file one worker cannot read is read by another, and the sum is exact", "[stored][retry]") {
  if (!can_switch_user()) {
    WARN("skipped: needs root and setpriv to run a worker as another user");
    return;
  }
  TestCluster cluster;
  const std::string path = write_npy(cluster);
  cluster.add_worker({.threads = 1, .name = "denied", .run_under = kAsNobody});
  cluster.add_worker({.threads = 1, .name = "reader"});
  cluster.wait_for_workers(2);
  std::vector<std::string> plain = kShape;
  plain.insert(plain.end(), {"--row-step", "1", "--col-step", "1", "--offset", "0"});
  const TimedRun want = pbench_on(cluster, plain);
  REQUIRE(want.status == 0);
  for (int i = 0; i < 3; ++i) {
    const TimedRun got = input_job(cluster, path);
    INFO(got.out);
    REQUIRE(WIFEXITED(got.status));
    REQUIRE(WEXITSTATUS(got.status) == 0);
    const auto g = nlohmann::json::parse(got.out), w = nlohmann::json::parse(want.out);
    CHECK(g["exact_terms"] == w["exact_terms"]);
    CHECK(g["sum"] == w["sum"]);
    CHECK(g["count"] == 2000 * 1000);
  }
  // The denied worker did fail chunks (psched logged each with the reason), and never failed a job.
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("failed on worker 'denied'") != std::string::npos);
  CHECK(log.find(path + ": Permission denied") != std::string::npos);
  CHECK(log.find("failed on worker 'reader'") == std::string::npos);
}

TEST_CASE("a file no worker can read fails the job with one line naming the file and the reason",
          "[stored][retry]") {
  if (!can_switch_user()) {
    WARN("skipped: needs root and setpriv to run a worker as another user");
    return;
  }
  TestCluster cluster;
  const std::string path = write_npy(cluster);
  cluster.add_worker({.threads = 1, .name = "denied-a", .run_under = kAsNobody});
  cluster.add_worker({.threads = 1, .name = "denied-b", .run_under = kAsNobody});
  cluster.wait_for_workers(2);
  const TimedRun got = input_job(cluster, path);
  INFO(got.out);
  REQUIRE(WIFEXITED(got.status));
  CHECK(WEXITSTATUS(got.status) != 0);
  CHECK(got.out.find(path + ": Permission denied") != std::string::npos);
  // Tried on both workers before the job gave up.
  CHECK(got.out.find("denied-a") != std::string::npos);
  CHECK(got.out.find("denied-b") != std::string::npos);
}
