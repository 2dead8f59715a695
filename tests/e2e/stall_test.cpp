// A scheduler that was itself stopped (SIGSTOP here; a VM pause, swap storm or debugger in real life)
// must not drop its healthy workers when it resumes: their heartbeats are in the sockets.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("psched stopped for three worker timeouts keeps every worker when it resumes", "[stall]") {
  TestCluster cluster({.extra_args = {"--worker-timeout", "1"}});
  for (int i = 0; i < 3; ++i) cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(3);
  std::vector<uint32_t> before;
  for (const auto& w : cluster.client().workers()) before.push_back(w.id);

  REQUIRE(kill(cluster.scheduler_pid(), SIGSTOP) == 0);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // the stall itself, not a wait for anything
  REQUIRE(kill(cluster.scheduler_pid(), SIGCONT) == 0);

  const std::string stalled = "event loop did not run";
  REQUIRE(eventually([&] { return cluster.log_of(cluster.scheduler_pid()).find(stalled) != std::string::npos; }));
  pclient::Client client = cluster.client();
  // Jobs keep running exact for another whole timeout and a half after the stall, and the same
  // three workers are still there, never re-registered.
  const pclient::Job job = arange_job(1000, 1000, 100, 100, 1, 1);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  do {
    const pclient::Result r = client.run(job);
    CHECK(check(job, r) == "");
    CHECK(r.retries == 0);
  } while (std::chrono::steady_clock::now() < until);
  std::vector<uint32_t> after;
  for (const auto& w : client.workers()) after.push_back(w.id);
  CHECK(after == before);
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("' lost:") == std::string::npos);
}
