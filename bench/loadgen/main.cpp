// psched-loadgen: a simulated GPU fleet and a crowd of clients against a real psched, over the real
// protocol, in one process on a loop per CPU it may use (--threads; loadgen.h). It exits 1 when any result differs from
// the closed form, or any job failed without --allow-failures; 2 when it cannot run.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "app/cli_checks.h"
#include "app/exit_codes.h"
#include "bench/loadgen/loadgen.h"
#include "core/closed_form.h"

using namespace psched;
using namespace psched::loadgen;

int main(int argc, char** argv) {
  LoadgenOptions o;
  CLI::App app{"psched-loadgen: simulated GPU workers and clients against a real psched"};
  app.add_option("--scheduler", o.scheduler, "scheduler address (tcp://host:port)")->required();
  app.add_option("--scheduler-pid", o.scheduler_pid, "psched's pid: report its CPU and memory from /proc");
  app.add_option("-w,--workers", o.workers, "simulated GPU workers")->capture_default_str();
  app.add_option("--element-ps", o.element_ps, "simulated device time per array element, picoseconds")
      ->capture_default_str();
  app.add_option("--chunk-ns", o.chunk_ns,
                 "simulated host time per chunk beside the device's, not reported as busy time (a real GPU "
                 "worker's per-chunk launch and report cost: ~270 ns for one-element chunks on an H200)")
      ->capture_default_str();
  app.add_option("--slots", o.slots, "chunks in flight per worker (Hello slots)")->capture_default_str();
  app.add_option("--window-elements", o.window_elements, "Hello windowElements (default: the CUDA backend's, 8 batches)")->capture_default_str();
  app.add_option("--result-batch", o.result_batch,
                 "report results once this many chunks are done (or the queue ran dry); 1: each at once; "
                 "0: one batch of the CUDA backend's (worker/cuda/batching.h)")
      ->capture_default_str();
  app.add_option("--test-corrupt-chunk", o.corrupt_chunk,
                 "test only: workers answer this chunk of every job with a wrong sum (the check must fail)");
  app.add_option("--test-crash-on-chunk", o.crash_chunk,
                 "test only: a worker handed this chunk dies, and another takes its place");
  app.add_option("--idle", o.idle_s, "hold the fleet idle this long first (seconds): heartbeat cost");
  app.add_option("-c,--clients", o.clients, "client connections")->capture_default_str();
  app.add_option("-j,--jobs", o.jobs, "jobs per client, submitted at once")->capture_default_str();
  app.add_option("--duration", o.duration_s, "instead: keep submitting for this long (seconds)");
  app.add_option("--outstanding", o.outstanding, "with --duration: jobs in flight per client");
  app.add_option("--churn-ms", o.churn_ms, "kill a random simulated worker this often and start another");
  app.add_flag("--allow-failures", o.allow_failures, "failed jobs (each with its message) do not fail the run");
  app.add_option("--ready-timeout", o.ready_timeout_s, "seconds to wait for the fleet to register");
  app.add_option("--threads", o.threads,
                 "threads, each a loop with its part of the workers and clients (default: one per CPU the loadgen "
                 "may run on, so it is never the bottleneck where it has CPUs of its own)");
  app.add_option("--generator", o.generator, "arange or constant")->check(CLI::IsMember({"arange", "constant"}));
  app.add_option("-x,--rows", o.job.rows)->capture_default_str();
  app.add_option("-y,--cols", o.job.cols)->capture_default_str();
  app.add_option("--chunk-x", o.job.chunk_rows)->capture_default_str();
  app.add_option("--chunk-y", o.job.chunk_cols)->capture_default_str();
  app.add_flag("!--same-jobs", o.vary, "every job the same (default: start, step and selection vary)");
  app.add_option("--verify", o.verify, "verify this fraction of every job's chunks (pbench --verify): a mismatch "
                                       "fails the run")
      ->check(CLI::Range(0.0, 1.0));
  o.job.rows = o.job.cols = 1000;
  o.job.chunk_rows = o.job.chunk_cols = 100;
  if (const std::optional<int> code = psched::cli::parse(app, argc, argv)) return *code;
  o.job.generator = o.generator == "arange" ? Generator::kArange : Generator::kConstant;
  o.job.param0 = 1;
  o.job.param1 = 1;
  if (Status st = validate(o.job); !st) return psched::exit_on("psched-loadgen", st);
  if (!expected_result(o.job).sum_exact) {
    fmt::print(stderr, "psched-loadgen: the job's sum is not exact in float64 (values past 2^53): "
                       "results could not be checked bit for bit\n");
    return psched::kExitUsage;
  }
  spdlog::set_level(spdlog::level::warn);
  return run_loadgen(o);
}
