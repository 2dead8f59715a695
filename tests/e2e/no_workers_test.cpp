// A job whose last worker is gone is never left waiting in silence: the client is told at once
// (Progress.noWorkers), keeps being told, and gives the job up after its no-workers timeout unless
// a worker joins, in which case the job completes with the same bits.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;
using Clock = std::chrono::steady_clock;

namespace {

const std::map<std::string, std::string> kSlowChunks = {{"PSCHED_TEST_CHUNK_DELAY_MS", "15"}};

pclient::Job slow_job() { return arange_job(2000, 2000, 100, 100, 1, 1); }  // 400 chunks, ~6 s

void kill_now(TestCluster& cluster, pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  cluster.forget(pid);
}

}  // namespace

TEST_CASE("the last worker killed mid-job: the client hears of it within 2 s and the job fails after "
          "its no-workers timeout, saying why",
          "[no_workers]") {
  TestCluster cluster;
  const pid_t worker = cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  Clock::time_point killed{}, told{};
  uint64_t left_when_told = 0;
  pclient::RunOptions options;
  options.no_workers_timeout_ms = 1500;
  options.on_progress = [&](const pclient::Progress& p) {
    if (killed == Clock::time_point{} && p.chunks_done >= 10) {
      kill_now(cluster, worker);
      killed = Clock::now();
    }
    if (p.no_workers && told == Clock::time_point{}) {
      told = Clock::now();
      left_when_told = p.chunks_total - p.chunks_done;
    }
  };
  std::string error;
  try {
    client.run(slow_job(), options);
  } catch (const pclient::Error& e) {
    error = e.what();
  }
  const auto gave_up = Clock::now();
  REQUIRE(killed != Clock::time_point{});
  REQUIRE(told != Clock::time_point{});
  CHECK(told - killed < std::chrono::seconds(2));
  CHECK(left_when_told > 0);
  CHECK(gave_up - told >= std::chrono::milliseconds(1500));
  CHECK(error.find("no workers: none joined within 1.5 s, ") == 0);
  CHECK(error.find(" of 400 chunks left; the job was cancelled") != std::string::npos);
  // The scheduler cancelled it (its client asked), and it is still serving.
  REQUIRE(eventually([&] { return cluster.log_of(cluster.scheduler_pid()).find("job 1 cancelled") != std::string::npos; }));
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("no workers: 1 job waits for one to join") != std::string::npos);
}

TEST_CASE("a worker that joins while a job waits with no workers: the job completes exact", "[no_workers]") {
  TestCluster cluster;
  const pid_t first = cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  const pclient::Job job = arange_job(1000, 1000, 100, 100, 1, 1);  // 100 chunks
  bool killed = false, told = false, resumed = false;
  pclient::RunOptions options;
  options.no_workers_timeout_ms = 60000;
  options.on_progress = [&](const pclient::Progress& p) {
    if (!killed && p.chunks_done >= 5) {
      kill_now(cluster, first);
      killed = true;
    }
    if (p.no_workers && !told) {
      told = true;
      cluster.add_worker({.threads = 2});  // registers while the job waits
    }
    if (told && !p.no_workers) resumed = true;
  };
  const pclient::Result r = client.run(job, options);
  CHECK(told);
  CHECK(resumed);
  CHECK(check(job, r) == "");
}

TEST_CASE("a job submitted to a cluster with no workers is told so at once", "[no_workers]") {
  TestCluster cluster;
  pclient::Client client = cluster.client();
  bool told = false;
  pclient::RunOptions options;
  options.no_workers_timeout_ms = 500;
  options.on_progress = [&](const pclient::Progress& p) { told = told || p.no_workers; };
  CHECK_THROWS_WITH(client.run(arange_job(100, 100, 10, 10, 1, 1), options),
                    Catch::StartsWith("no workers: none joined within 0.5 s, 100 of 100 chunks left"));
  CHECK(told);
}

TEST_CASE("pbench says at once that no worker is left and gives up after --no-workers-timeout",
          "[no_workers][pbench]") {
  TestCluster cluster;
  const pid_t worker = cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  TimedRun run;
  std::thread pbench([&] {
    run = run_timed({bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(), "--generator",
                     "arange", "-x", "2000", "-y", "2000", "--chunk-x", "100", "--chunk-y", "100",
                     "--no-workers-timeout", "2"},
                    60000);
  });
  // The job is running once psched logs it; then its only worker dies.
  const bool started = eventually([&] {
    return cluster.log_of(cluster.scheduler_pid()).find("job 1 from client 'pbench'") != std::string::npos;
  });
  kill_now(cluster, worker);
  pbench.join();
  REQUIRE(started);
  INFO(run.out);
  CHECK(WEXITSTATUS(run.status) == 1);
  CHECK(run.out.find("pbench: no workers: waiting for one to join, ") != std::string::npos);
  CHECK(run.out.find("no workers: none joined within 2 s, ") != std::string::npos);
}

TEST_CASE("pbench with no worker registered gives up after --no-workers-timeout in seconds, submitting nothing",
          "[no_workers][pbench]") {
  TestCluster cluster;
  const TimedRun run = run_timed({bin_dir() + "/pbench", "-d", "--scheduler", cluster.address(),
                                  "--no-workers-timeout", "1"});
  INFO(run.out);
  CHECK(WEXITSTATUS(run.status) == 1);
  CHECK(run.out.find("pbench: no workers: none registered within 1 s, so nothing was submitted") !=
        std::string::npos);
  CHECK(run.out.find(" ms") == std::string::npos);
}

TEST_CASE("pbench --no-workers-timeout refuses what is neither seconds nor 'never'", "[no_workers][pbench]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-d", "--no-workers-timeout", "soon"}, &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(out.find("--no-workers-timeout") != std::string::npos);
}
