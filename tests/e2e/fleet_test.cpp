// Scale in small: psched-loadgen's simulated GPU fleet and clients (bench/loadgen) against a real
// psched. Every job's result must be the closed form's bits, psched's memory stays within its
// limits, and a fleet's efficiency stays above a floor measured on it; the loadgen's own checks can
// fail. bench/scale.sh and bench/steady.sh run the large versions; the faults (crashing chunks,
// psched killed and restarted, chaos) are in fleet_faults_test.cpp.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "support/job_helpers.h"
#include "support/loadgen_output.h"
#include "support/test_cluster.h"

using namespace psched::test;

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
// 1000² chunks (7.8 million chunks) runs far above it on a 2-core machine, and ran far below it
// with per-chunk costs (bench/steady.sh; the figures in bench/README.md). The floor leaves room
// for a loaded CI machine running tests beside it, and fails on a return to anything like those.
constexpr double kFleetEfficiencyFloorPct = 50;

TEST_CASE("one job on 256 simulated H100s in 1000² chunks runs at the fleet floor of its ideal, exact",
          "[fleet][serial]") {
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
// sat idle in gaps (their windows dry while work was queued) when each job was dispatched alone as
// it came and top-ups took a part of the queue alone; with the jobs dispatched together and
// windows filled to the fleet's level, not at all (psched-loadgen's device_idle_ms;
// bench/README.md).
constexpr double kMaxGapPctOfIdeal = 1.5;

TEST_CASE("16 big jobs at once on 512 simulated H100s: no device waits for work while work is queued",
          "[fleet][serial]") {
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
