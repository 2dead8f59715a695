// A worker that keeps its heartbeat but stops making progress (a hung kernel, made here with the
// test-only PSCHED_TEST_CHUNK_DELAY_MS) must not hold a job forever: psched declares it stalled
// (--stall-timeout), runs its work elsewhere, tells the client and names it in /api/status; and the
// hung worker still ends on SIGTERM, with the exit code that says its device hung (README, "Exit
// codes"), or at once on a second signal.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <chrono>
#include <csignal>

#include <nlohmann/json.hpp>

#include "app/exit_codes.h"
#include "dashboard/http_probe.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

const std::map<std::string, std::string> kHungKernel = {{"PSCHED_TEST_CHUNK_DELAY_MS", "100000000"}};

// Waits up to timeout_ms for `pid` (a child of this test) to exit; its status, or -1.
int exit_status_within(pid_t pid, int timeout_ms) {
  int status = -1;
  const bool exited = eventually([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeout_ms);
  return exited ? status : -1;
}

}  // namespace

TEST_CASE("a worker whose kernel hangs while its heartbeat goes on has its work run elsewhere: the job "
          "ends exact, the client is told which worker stalled, and the hung worker exits 4 on SIGTERM "
          "or 1 at once on a second signal", "[stall]") {
  TestCluster cluster({.extra_args = {"--worker-timeout", "2", "--stall-timeout", "2"}, .dashboard = "127.0.0.1:0"});
  const pid_t hung = cluster.add_worker({.threads = 1, .name = "hung", .env = kHungKernel});
  const pid_t hung_too = cluster.add_worker({.threads = 1, .name = "hung-too", .env = kHungKernel});
  cluster.add_worker({.threads = 1, .name = "healthy"});
  cluster.wait_for_workers(3);

  const TimedRun run = run_timed({bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "--generator",
                                  "arange", "-x", "1000", "-y", "1000", "--chunk-x", "100", "--chunk-y", "100",
                                  "--check"},
                                 60000);
  INFO(run.out);
  REQUIRE(WIFEXITED(run.status));
  CHECK(WEXITSTATUS(run.status) == 0);
  CHECK(run.out.find("Check: ok") != std::string::npos);
  CHECK(run.out.find("worker 'hung' stalled") != std::string::npos);
  CHECK(run.out.find("worker 'hung-too' stalled") != std::string::npos);
  // Both hung workers are still connected, marked stalled in /api/status, holding nothing.
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("'hung-too' stalled") != std::string::npos);
  const auto api = nlohmann::json::parse(http_request(port_of(cluster.dashboard()), "GET", "/api/status").body);
  REQUIRE(api["workers"].size() == 3);
  for (const auto& w : api["workers"]) {
    CHECK(w["stalled"] == (w["name"] != "healthy"));
    CHECK(w["tasks_in_flight"] == 0);
  }

  // The hung device call never returns: the first SIGTERM's stop cannot finish, and says so.
  REQUIRE(kill(hung, SIGTERM) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  const int status = exit_status_within(hung, 15000);
  cluster.forget(hung);
  REQUIRE(status != -1);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == psched::kExitDeviceHung);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK(cluster.log_of(hung).find("does not return") != std::string::npos);

  // A second signal does not wait for the stop.
  REQUIRE(kill(hung_too, SIGTERM) == 0);
  REQUIRE(eventually([&] { return cluster.log_of(hung_too).find("leaving: SIGTERM") != std::string::npos; }));
  REQUIRE(kill(hung_too, SIGTERM) == 0);
  const int again = exit_status_within(hung_too, 2000);
  cluster.forget(hung_too);
  REQUIRE(again != -1);
  REQUIRE(WIFEXITED(again));
  CHECK(WEXITSTATUS(again) == psched::kExitFailure);
}
