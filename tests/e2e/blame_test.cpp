// Blame only what was shown (issue 49, docs/design.md "Task states"): workers killed from outside
// while each holds a window of a job's chunks prove nothing about any one chunk, so a job whose
// chunks were lost with three killed workers completes, exact, instead of failing as if one of them
// were a poison chunk. Only a chunk that takes down a worker running it alone counts.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <csignal>
#include <future>

#include <nlohmann/json.hpp>

#include "dashboard/http_probe.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

// The chunks `name` holds, from /api/status (0 while it is not registered).
uint64_t in_flight_of(const TestCluster& cluster, const std::string& name) {
  const auto api = nlohmann::json::parse(http_request(port_of(cluster.dashboard()), "GET", "/api/status").body);
  for (const auto& w : api["workers"])
    if (w["name"] == name) return w["tasks_in_flight"].get<uint64_t>();
  return 0;
}

}  // namespace

TEST_CASE("three workers killed from outside while holding a job's chunks do not fail it, and the job ends exact",
          "[blame]") {
  TestCluster cluster({.dashboard = "127.0.0.1:0"});
  // 20 chunks of 200 ms each on one thread: a worker holds the whole job while it runs.
  const std::map<std::string, std::string> slow = {{"PSCHED_TEST_CHUNK_DELAY_MS", "200"}};
  const pclient::Job job = arange_job(20, 10, 1, 10);
  cluster.add_worker({.threads = 1, .name = "k0", .env = slow});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  auto result = std::async(std::launch::async, [&] { return client.run(job); });
  // Each of three workers is killed -9 once it holds chunks: the first two with a window of them
  // (the chunks the first held are in the second's too, then suspects); the third running a
  // suspect alone, which counts once. Before, the three losses counted three times.
  for (int k = 0; k < 3; ++k) {
    const std::string name = "k" + std::to_string(k);
    if (k > 0) cluster.add_worker({.threads = 1, .name = name, .env = slow});
    const pid_t pid = cluster.worker_pids().back();
    REQUIRE(eventually([&] { return in_flight_of(cluster, name) > 0; }));
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    cluster.forget(pid);
  }
  cluster.add_worker({.threads = 1, .name = "survivor"});
  REQUIRE(result.wait_for(std::chrono::seconds(60)) == std::future_status::ready);
  const pclient::Result r = result.get();
  CHECK(check(job, r) == "");
  CHECK(r.retries >= 20);  // the first window came back whole at least
}
