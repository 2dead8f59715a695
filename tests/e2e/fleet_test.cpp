// Scale and chaos in small: psched-loadgen's simulated GPU fleet and clients (bench/loadgen) against
// a real psched, with real pcuda-worker processes killed, stopped and started beside them and psched
// itself killed and restarted. Every job's result must be the closed form's bits; a job may fail
// only with a message that names its cause; nothing may be left running. bench/scale.sh runs the
// large versions.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <optional>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include "app/process.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kSchedulerPeakLimitKb = 512 * 1024;  // ASan's shadow and quarantine
constexpr int64_t kSchedulerBytesPerWorkerLimit = 64 * 1024;
#else
constexpr uint64_t kSchedulerPeakLimitKb = 64 * 1024;
constexpr int64_t kSchedulerBytesPerWorkerLimit = 16 * 1024;  // measured: ~2 KB (bench/README.md)
#endif

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct JobCounts {
  uint64_t submitted = 0, exact = 0, failed = 0, mismatched = 0;
};

// The loadgen's "jobs: S submitted, X exact, F failed, M mismatched" line. (No std::regex: GCC 12
// warns inside <regex> in the sanitized build.)
JobCounts job_counts(const std::string& out) {
  JobCounts c;
  const size_t at = out.find("jobs: ");
  if (at == std::string::npos) return c;
  unsigned long long s = 0, x = 0, f = 0, m = 0;
  if (std::sscanf(out.c_str() + at, "jobs: %llu submitted, %llu exact, %llu failed, %llu mismatched", &s, &x,
                  &f, &m) == 4)
    c = {s, x, f, m};
  return c;
}

// The value of a loadgen "figure NAME VALUE" line; nullopt when absent.
std::optional<std::string> figure(const std::string& out, const std::string& name) {
  const std::string key = "figure " + name + " ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t end = out.find('\n', at);
  return out.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

uint64_t peak_rss_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

pid_t start_loadgen(const TestCluster& cluster, const std::vector<std::string>& args, const std::string& out) {
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/psched-loadgen";
  spec.args = {"--scheduler", cluster.address()};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.stdout_path = spec.stderr_path = out;
  spec.death_signal = SIGKILL;
  auto pid = psched::spawn_child(spec);
  REQUIRE(pid);
  return *pid;
}

}  // namespace

TEST_CASE("64 simulated GPUs and 10 clients submitting 10 jobs each at once, from three loadgen threads: every "
          "result exact, psched memory bounded",
          "[fleet]") {
  TestCluster cluster;
  const pid_t scheduler = cluster.scheduler_pid();
  std::string out;
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(),
                                  "--scheduler-pid", std::to_string(scheduler), "-w", "64", "-c", "10",
                                  "-j", "10", "--generator", "arange", "-x", "1000", "-y", "1000",
                                  "--chunk-x", "100", "--chunk-y", "100", "--threads", "3"},
                                 &out, 60000);
  INFO(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const JobCounts c = job_counts(out);
  CHECK(c.submitted == 100);
  CHECK(c.exact == 100);
  CHECK(c.mismatched == 0);
  CHECK(out.find("chunks: 10000 done") != std::string::npos);
  CHECK(out.find("loadgen_threads: 3") != std::string::npos);
  CHECK(peak_rss_kb(scheduler) < kSchedulerPeakLimitKb);
  // Every simulated worker registered and left (Goodbye), nothing held.
  // Every simulated worker said Goodbye; the scheduler holds none of them.
  CHECK(eventually([&] { return cluster.log_of(scheduler).find("'sim-63' left") != std::string::npos; }));
}

TEST_CASE("verify on 64 simulated GPUs, one killed every 50 ms: every chunk computed twice in blocks, every "
          "result exact, no mismatch",
          "[fleet]") {
  TestCluster cluster;
  std::string out;
  // 8 jobs of 10^4 chunks of 400 elements (verify blocks of 128 chunks), 0.4 ms a chunk, windows
  // of 64 chunks: about a second, in which some twenty workers are killed. Their first copies and
  // verify copies go to others; no worker computes wrong, so no copy may differ.
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w", "64",
                                  "-c", "2", "-j", "4", "--generator", "arange", "-x", "2000", "-y", "2000",
                                  "--chunk-x", "20", "--chunk-y", "20", "--element-ps", "1000000",
                                  "--window-elements", "25600", "--churn-ms", "50", "--verify", "1.0"},
                                 &out, 60000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 0);
  const JobCounts c = job_counts(out);
  CHECK(c.exact == 8);
  CHECK(c.mismatched == 0);
  CHECK(c.failed == 0);
  // Every chunk twice at least (a killed worker's last report may have been on its way).
  unsigned long long done = 0, kills = 0;
  const size_t at = out.find("chunks: ");
  REQUIRE(at != std::string::npos);
  REQUIRE(std::sscanf(out.c_str() + at, "chunks: %llu done, %*u refused; worker kills: %llu", &done, &kills) == 2);
  CHECK(done >= 160000);
  CHECK(kills > 0);
}

TEST_CASE("256 idle simulated workers: psched holds a few kilobytes per worker and keeps them all registered",
          "[fleet]") {
  TestCluster cluster({.extra_args = {"--worker-timeout", "1"}});
  const pid_t scheduler = cluster.scheduler_pid();
  std::string out;
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(),
                                  "--scheduler-pid", std::to_string(scheduler), "-w", "256", "--idle", "2"},
                                 &out, 60000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 0);
  const std::optional<std::string> per_worker = figure(out, "psched_bytes_per_worker");
  REQUIRE(per_worker);
  CHECK(std::stoll(*per_worker) < kSchedulerBytesPerWorkerLimit);
  // Idle past twice --worker-timeout: heartbeats alone kept every worker (none lost, none rejoined).
  CHECK(cluster.log_of(scheduler).find("nothing received") == std::string::npos);
}

// The ranges design's floor (issue 26): one job of ~0.2 s of ideal GPU time on 256 simulated H100s in
// 1000² chunks (7.8 million chunks) ran at 95-97% of ideal on a 2-core machine (bench/steady.sh;
// 6% before ranges, report pacing and timed windows). The floor leaves room for a loaded CI
// machine running tests beside it, and fails on a return to anything like per-chunk costs.
constexpr double kFleetEfficiencyFloorPct = 50;

TEST_CASE("one job on 256 simulated H100s in 1000² chunks runs at the fleet floor of its ideal, exact",
          "[fleet]") {
  TestCluster cluster;
  // Up to three runs, the best one held to the floor: a run is 0.2 s, and another test hogging both
  // cores for that long took one below it in a loaded ctest run; a return to per-chunk costs
  // fails all three. Every run must be exact.
  double best_pct = 0;
  for (int attempt = 0; attempt < 3 && best_pct < kFleetEfficiencyFloorPct; ++attempt) {
    std::string out;
    const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(),
                                    "--scheduler-pid", std::to_string(cluster.scheduler_pid()), "-w", "256",
                                    "-x", "2800000", "-y", "2800000", "--chunk-x", "1000", "--chunk-y", "1000",
                                    "--same-jobs", "-c", "1", "-j", "1", "--generator", "constant"},
                                   &out, 60000);
    INFO(out);
    REQUIRE(WEXITSTATUS(status) == 0);
    REQUIRE(job_counts(out).exact == 1);
    REQUIRE(out.find("chunks: 7840000 done") != std::string::npos);
    const std::optional<std::string> efficiency = figure(out, "efficiency_pct");
    REQUIRE(efficiency);
    best_pct = std::max(best_pct, std::stod(*efficiency));
  }
#if !defined(__SANITIZE_ADDRESS__)  // a speed floor means nothing under ASan; exactness does
  CHECK(best_pct >= kFleetEfficiencyFloorPct);
#endif
}

// 16 big jobs at once from 4 clients on 512 simulated H100s (0.2 s of ideal in all): the devices
// sat 16-23 ms each idle in gaps (their windows dry while work was queued) when each job was
// dispatched alone as it came and top-ups took a part of the queue alone; with the jobs dispatched
// together and windows filled to the fleet's level, none (psched-loadgen's device_idle_ms).
constexpr double kMaxGapPctOfIdeal = 1.5;

TEST_CASE("16 big jobs at once on 512 simulated H100s: no device waits for work while work is queued",
          "[fleet]") {
  TestCluster cluster;
  double best_gap_pct = 100;  // best of up to three runs, as above: a loaded CI machine
  for (int attempt = 0; attempt < 3 && best_gap_pct > kMaxGapPctOfIdeal; ++attempt) {
    std::string out;
    const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(),
                                    "--scheduler-pid", std::to_string(cluster.scheduler_pid()), "-w", "512",
                                    "-x", "1000000", "-y", "1000000", "--chunk-x", "1000", "--chunk-y", "1000",
                                    "--same-jobs", "-c", "4", "-j", "4", "--generator", "constant"},
                                   &out, 60000);
    INFO(out);
    REQUIRE(WEXITSTATUS(status) == 0);
    REQUIRE(job_counts(out).exact == 16);
    const std::optional<std::string> gap = figure(out, "idle_gap_ms"), ideal = figure(out, "ideal_s");
    REQUIRE(gap);
    REQUIRE(ideal);
    best_gap_pct = std::min(best_gap_pct, 100 * std::stod(*gap) / (1e3 * std::stod(*ideal)));
  }
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(best_gap_pct <= kMaxGapPctOfIdeal);
#endif
}

TEST_CASE("a job of 2^32 chunks completes exact with psched's peak memory under 64 MB", "[fleet]") {
  TestCluster cluster;
  const pid_t scheduler = cluster.scheduler_pid();
  std::string out;
  // 131072² elements in 2 x 2 chunks: 2^32 chunks, each one element of (x + 1)[::2, ::2].
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(),
                                  "--scheduler-pid", std::to_string(scheduler), "-w", "256",
                                  "-x", "131072", "-y", "131072", "--chunk-x", "2", "--chunk-y", "2",
                                  "--same-jobs", "-c", "1", "-j", "1", "--generator", "constant"},
                                 &out, 60000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(job_counts(out).exact == 1);
  CHECK(out.find("chunks: 4294967296 done") != std::string::npos);
  CHECK(peak_rss_kb(scheduler) < kSchedulerPeakLimitKb);
}

TEST_CASE("a chunk that crashes simulated GPUs holding deep windows is found by halving and named with every worker it took down",
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
  CHECK(taken_down >= 4);  // two window losses, at least one halving, then the chunk alone
  CHECK(taken_down <= 3 + 6);  // halving 2^22 down to 2^16 costs at most 6 crashes
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

TEST_CASE("a simulated worker that answers one wrong partial is caught: the check can fail", "[fleet]") {
  TestCluster cluster;
  std::string out;
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w",
                                  "4", "-c", "2", "-j", "3", "--generator", "arange",
                                  "--test-corrupt-chunk", "17"},
                                 &out, 20000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(job_counts(out).mismatched == 6);
  CHECK(out.find("mismatch: job ") != std::string::npos);
}

TEST_CASE("the loadgen refuses a job it cannot check bit for bit", "[fleet]") {
  TestCluster cluster;
  std::string out;
  // arange values past 2^53 are rounded as they are made: no exact closed form.
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w",
                                  "1", "-c", "1", "--generator", "arange", "-x", "100000000", "-y",
                                  "100000000", "--chunk-x", "40000", "--chunk-y", "40000"},
                                 &out, 20000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("not exact in float64") != std::string::npos);
}

TEST_CASE("the loadgen stops at once when psched refuses its workers at Hello, not after its ready timeout",
          "[fleet]") {
  TestCluster cluster({.env = {{"PSCHED_TOKEN", "a token the loadgen does not present"}}});
  std::string out;
  const auto start = std::chrono::steady_clock::now();
  const int status = run_command({bin_dir() + "/psched-loadgen", "--scheduler", cluster.address(), "-w", "8",
                                  "-c", "1", "--ready-timeout", "60"},
                                 &out, 30000);
  INFO(out);
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(out.find("psched refused") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
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
