// Faults in small: psched-loadgen's simulated GPUs and real pcuda-worker processes crashing on a
// chunk, killed, stopped and started, and psched itself killed and restarted mid-job. Every job's
// result must be the closed form's bits; a job may fail only with a message that names its cause;
// nothing may be left running. bench/chaos.sh runs the large version.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "app/process.h"
#include "support/job_helpers.h"
#include "support/loadgen_output.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("a chunk that crashes simulated GPUs holding deep windows is found by halving and named with the workers it took down alone",
          "[fleet]") {
  TestCluster cluster;
  std::string out;
  // 2^26 chunks of 100 elements: once their speed is known, GPUs hold windows of 2^22 chunks. A
  // worker handed chunk 2^25 + 12345 dies (another takes its place): its window is lost twice, then
  // run alone and halved down to 2^16 chunks, which run one by one until the chunk runs alone.
  const uint64_t poison = (uint64_t{1} << 25) + 12345;
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w", "4",
                                  "-x", "81920", "-y", "81920", "--chunk-x", "10", "--chunk-y", "10",
                                  "--same-jobs", "-c", "1", "-j", "1", "--generator", "constant",
                                  "--test-crash-on-chunk", std::to_string(poison), "--allow-failures"},
                                 &out, 60000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);  // no job exact
  CHECK(job_counts(out).failed == 1);
  unsigned long long chunk = 0, taken_down = 0;
  const size_t at = out.find("failure: 1 x chunk ");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(out.c_str() + at, "failure: 1 x chunk %llu took down %llu workers", &chunk, &taken_down) == 2);
  CHECK(chunk == poison);
  // Only crashes with the chunk alone count (and are named): the window losses and the halvings
  // before them are not held to the limit.
  CHECK(taken_down == 3);
  // A window deeper than the plain one (2^16 chunks) was lost.
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  unsigned long long deepest = 0;
  for (size_t p = log.find("' lost: "); p != std::string::npos; p = log.find("' lost: ", p + 1)) {
    const size_t open = log.find(" (", p);
    unsigned long long n = 0;
    if (open != std::string::npos && std::sscanf(log.c_str() + open, " (%llu chunk", &n) == 1)
      deepest = std::max(deepest, n);
  }
  CHECK(deepest > (1u << 16));
  // The cluster keeps serving: the same job without the poison is exact.
  out.clear();
  CHECK(WEXITSTATUS(run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w", "4",
                                 "-x", "81920", "-y", "81920", "--chunk-x", "10", "--chunk-y", "10",
                                 "--same-jobs", "-c", "1", "-j", "1", "--generator", "constant"},
                                &out, 60000)) == 0);
  CHECK(job_counts(out).exact == 1);
}

// psched dies mid-job: one slow CPU worker, a client (with reconnect_ms when given), and a run
// whose progress callback signals psched after 5 chunks, then does `after` (e.g. restart it on the
// same port; the worker rejoins by itself).
struct SchedulerDiesMidJob {
  TestCluster cluster;
  std::optional<pclient::Client> client;
  pid_t scheduler = -1;
  bool killed = false;

  explicit SchedulerDiesMidJob(int reconnect_ms) {
    cluster.add_worker({.threads = 1, .env = {{"PSCHED_TEST_CHUNK_DELAY_MS", "15"}}});
    cluster.wait_for_workers(1);
    pclient::ConnectOptions connect;
    connect.address = cluster.address();
    connect.reconnect_ms = reconnect_ms;
    client.emplace(pclient::Client::connect(connect));
    scheduler = cluster.scheduler_pid();
  }
  pclient::RunOptions signal_after_5_chunks(int signal, std::function<void()> after = {}) {
    pclient::RunOptions options;
    options.on_progress = [this, signal, after](const pclient::Progress& p) {
      if (killed || p.chunks_done < 5) return;
      killed = true;
      kill(scheduler, signal);
      if (after) after();
    };
    return options;
  }
  void reap() {
    waitpid(scheduler, nullptr, 0);
    cluster.forget(scheduler);
  }
};

TEST_CASE("kill -9 of psched mid-job: libpclient fails the job at once, naming the lost connection",
          "[fleet]") {
  SchedulerDiesMidJob t(/*reconnect_ms=*/0);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(t.client->run(arange_job(2000, 2000, 100, 100), t.signal_after_5_chunks(SIGKILL)),
                    Catch::StartsWith("connection to the scheduler lost"));
  CHECK(t.killed);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  t.reap();
}

// kill -9, or SIGTERM ("scheduler shutting down", then Goodbye), and a new psched on the same port:
// a client with reconnect_ms submits the job again and gets the exact result, saying so.
static void check_resubmitted_after(int signal) {
  SchedulerDiesMidJob t(/*reconnect_ms=*/20000);
  const pclient::Job job = arange_job(1000, 1000, 100, 100);
  const pclient::Result r = t.client->run(job, t.signal_after_5_chunks(signal, [&] {
    t.reap();
    t.cluster.restart_scheduler();
  }));
  CHECK(t.killed);
  CHECK(r.resubmissions == 1);
  CHECK(check(job, r) == "");
  CHECK(r.chunks == 100);
}

TEST_CASE("psched killed -9 mid-job and restarted: a client with reconnect_ms resubmits and gets the exact result",
          "[fleet]") {
  check_resubmitted_after(SIGKILL);
}

TEST_CASE("psched stopped (SIGTERM) mid-job and restarted: a client with reconnect_ms resubmits and gets the exact result",
          "[fleet]") {
  check_resubmitted_after(SIGTERM);
}

TEST_CASE("with reconnect_ms and no scheduler coming back, run() fails after that time naming the lost connection",
          "[fleet]") {
  SchedulerDiesMidJob t(/*reconnect_ms=*/1500);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(t.client->run(arange_job(2000, 2000, 100, 100), t.signal_after_5_chunks(SIGKILL)),
                    Catch::StartsWith("connection to the scheduler lost") &&
                        Catch::Contains("no scheduler to resubmit the job to within 1500 ms"));
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(took >= std::chrono::milliseconds(1500));
  CHECK(took < std::chrono::seconds(10));
  CHECK_THROWS_WITH(t.client->workers(), Catch::StartsWith("connection to the scheduler lost"));
  t.reap();
}

TEST_CASE("chaos: workers killed every second, one stopped past the timeout, psched killed and restarted: "
          "no result differs, every failure names its cause, nothing is left running",
          "[fleet][chaos]") {
  const std::map<std::string, std::string> slow = {{"PSCHED_TEST_CHUNK_DELAY_MS", "3"}};
  std::vector<pid_t> started;
  pid_t loadgen = -1;
  std::string out;
  {
    TestCluster cluster({.extra_args = {"--worker-timeout", "1"}});
    for (int i = 0; i < 3; ++i) started.push_back(cluster.add_worker({.threads = 1, .env = slow}));
    cluster.wait_for_workers(3);
    const std::string out_path = cluster.dir() + "/loadgen.out";
    // 60 simulated GPUs, one killed every 500 ms; 10 clients with 2 jobs each in flight for 24 s.
    loadgen = start_loadgen(cluster,
                            {"-w", "60", "-c", "10", "--duration", "24", "--outstanding", "2", "--churn-ms",
                             "500", "--element-ps", "100000", "--allow-failures", "--generator", "arange",
                             "-x", "1000", "-y", "1000", "--chunk-x", "100", "--chunk-y", "100"},
                            out_path);
    REQUIRE(eventually([&] { return read_file(out_path).find("ready:") != std::string::npos; }, 30000));
    std::mt19937 random(7);
    int status = 0;
    for (int second = 0; !psched::wait_child(loadgen, 1000, &status); ++second) {
      // Each second: kill -9 one real worker and start another.
      std::vector<pid_t> workers = cluster.worker_pids();
      if (!workers.empty()) {
        const pid_t victim = workers[random() % workers.size()];
        kill(victim, SIGKILL);
        waitpid(victim, nullptr, 0);
        cluster.forget(victim);
      }
      started.push_back(cluster.add_worker({.threads = 1, .env = slow}));
      if (second == 4) {
        // SIGSTOP one past --worker-timeout: the scheduler declares it dead, then it comes back.
        const pid_t frozen = cluster.worker_pids().front();
        const pid_t scheduler = cluster.scheduler_pid();
        kill(frozen, SIGSTOP);
        CHECK(eventually([&] {
          return cluster.log_of(scheduler).find("nothing received for 1000 ms") != std::string::npos;
        }));
        kill(frozen, SIGCONT);
      }
      if (second == 10) {
        // psched dies mid-job; a new one on the same port takes over.
        const pid_t old = cluster.scheduler_pid();
        kill(old, SIGKILL);
        waitpid(old, nullptr, 0);
        cluster.forget(old);
        cluster.restart_scheduler({.extra_args = {"--worker-timeout", "1"}});
        started.push_back(cluster.scheduler_pid());
      }
      REQUIRE(second < 120);
    }
    loadgen = -1;
    out = read_file(out_path);
    INFO(out);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    const JobCounts c = job_counts(out);
    CHECK(c.mismatched == 0);
    CHECK(c.exact >= 100);
    CHECK(c.exact + c.failed == c.submitted);
    // The only failures allowed: jobs in flight when psched died, named as such.
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("failure:", 0) != 0) continue;
      INFO(line);
      CHECK(line.find(" x connection to the scheduler lost: ") != std::string::npos);
    }
    CHECK(peak_rss_kb(cluster.scheduler_pid()) < kSchedulerPeakLimitKb);
    CHECK(out.find("worker kills: ") != std::string::npos);
  }
  for (pid_t pid : started) CHECK_FALSE(process_alive(pid));
}
