// pbench: the DeepOps benchmark (sum.py) and friends on a psched cluster. Local mode (-c N,
// -g N) starts its own cluster; -d uses a running one (--scheduler or --scheduler-file).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <chrono>
#include <iostream>
#include <thread>
#include <optional>
#include <tuple>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/cli_checks.h"
#include "app/exit_codes.h"
#include "app/logging.h"
#include "client/job_spec_of.h"
#include "cluster_report.h"
#include "core/closed_form.h"
#include "core/gpu_health.h"
#include "core/job_spec.h"
#include "core/plural.h"
#include "core/reference_sums.h"
#include "local_cluster.h"
#include "net/event_loop.h"
#include "net/scheduler_file.h"
#include "net/token.h"
#include "pclient/client.h"
#include "report.h"
#include "verify_report.h"

namespace {

using pbench::devices_json;
using pbench::draw_progress;
using pbench::human_bytes;
using pbench::print_workers;
using pbench::run_share;
using pbench::RunShare;
using pbench::summarize;

struct Flags {
  pclient::Job job;
  int gpus = 0, cpus = 0, repeat = 1, nthreads = 0;
  bool distributed = false, json = false, check = false, quiet = false, cluster_info = false;
  std::string scheduler, scheduler_file, token_file, memory_limit, log_level = "warning";
  psched::TlsFiles tls;
  std::string report_html, report_json;  // --report, --report-json: files to write after the run
  double mean = 10.0, std_dev = 1.0, low = 0.0, high = 1.0, start = 0.0, step = 1.0, value = 1.0;
  std::optional<int64_t> row_start, row_stop, col_start, col_stop;  // negative: from the end
  int connect_timeout_ms = 5000;
  int reconnect_s = 0;
  int no_workers_timeout_ms = pclient::RunOptions::kDefaultNoWorkersTimeoutMs;  // 0: never
  int spin_us = -1;
  double verify = 0;  // --verify: share of chunks computed twice (0: off)

  bool local_mode() const { return gpus > 0 || cpus > 0; }
};

void add_mode_flags(CLI::App& app, Flags& f) {
  auto* g_opt = app.add_option("-g,--gpus", f.gpus, "Local mode: start a cluster with N GPU workers (GPUs 0..N-1)")
                    ->transform(psched::cli::unsigned_in(1, 1024));
  auto* c_opt = app.add_option("-c,--cpus", f.cpus, "Local mode: start a cluster with N CPU workers")
                    ->transform(psched::cli::unsigned_in(1, 1024));
  auto* d_opt = app.add_flag("-d,--distributed", f.distributed,
                             "Use a running cluster (--scheduler or --scheduler-file; default localhost:8786)");
  g_opt->excludes(c_opt);
  d_opt->excludes(g_opt)->excludes(c_opt);
}

void add_cluster_flags(CLI::App& app, Flags& f) {
  app.add_option("--scheduler", f.scheduler, "Scheduler address: tcp://HOST:PORT, tls://HOST:PORT, HOST:PORT or HOST")
      ->check(psched::cli::non_empty());
  app.add_option("--scheduler-file", f.scheduler_file, "Read the scheduler address from this file")
      ->check(psched::cli::non_empty());
  app.add_option("--token-file", f.token_file, "File holding the cluster token (or set PSCHED_TOKEN)")
      ->check(psched::cli::non_empty());
  psched::cli::add_tls_flags(app, f.tls, "this client's");
  app.add_option("--nthreads", f.nthreads, "Local CPU mode: threads per worker (default: cores / N)")
      ->transform(psched::cli::unsigned_in(1, 4096));
  app.add_option("--memory-limit", f.memory_limit, "Local mode: --memory-limit for each worker");
  app.add_option("--connect-timeout", f.connect_timeout_ms, "Milliseconds to wait for the scheduler")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 3600000));
  app.add_option("--reconnect", f.reconnect_s,
                 "Seconds to wait for the scheduler to come back when the connection to it is lost "
                 "mid-job (psched killed or restarted), then submit the job again: the same bits "
                 "(default 0: fail at once)")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 86400));
  app.add_option_function<std::string>(
         "--no-workers-timeout",
         [&f](const std::string& v) {
           f.no_workers_timeout_ms = v == "never" ? 0 : std::stoi(v) * 1000;
         },
         "Seconds a job may wait with no worker connected (none registered yet, or the last one "
         "left or died) before pbench gives it up, or 'never' (default: " +
             std::to_string(pclient::RunOptions::kDefaultNoWorkersTimeoutMs / 1000) + ")")
      ->check(CLI::IsMember({"never"}) | psched::cli::unsigned_in(1, 86400));
  app.add_option("--spin-us", f.spin_us,
                 "Microseconds the client (and, in local mode, the daemons) keep polling after each "
                 "message before sleeping; 0 = sleep at once (default: " +
                     std::to_string(psched::kDefaultSpin.count()) + ")")
      ->transform(psched::cli::unsigned_in(0, 1000000));
}

void add_job_flags(CLI::App& app, Flags& f) {
  pclient::Job& job = f.job;
  // Sizes, chunks and steps: at least 1. Starts and stops: any 64-bit integer (negative: from the end).
  const CLI::Validator count = psched::cli::unsigned_in(1, UINT64_MAX);
  const CLI::Validator index = psched::cli::signed_in(INT64_MIN, INT64_MAX);
  app.add_option("-x,--rows", job.rows, "Rows of the array")->capture_default_str()->transform(count);
  app.add_option("-y,--cols", job.cols, "Columns of the array")->capture_default_str()->transform(count);
  app.add_option("--chunk-x", job.chunk_rows, "Rows per chunk")->capture_default_str()->transform(count);
  app.add_option("--chunk-y", job.chunk_cols, "Columns per chunk")->capture_default_str()->transform(count);
  app.add_option("--dtype", job.dtype, "float64 or float32")->capture_default_str();
  app.add_option("--generator", job.generator, "normal, uniform, arange or constant")->capture_default_str();
  app.add_option("--mean", f.mean, "normal: mean")->capture_default_str();
  app.add_option("--std", f.std_dev, "normal: standard deviation")->capture_default_str();
  app.add_option("--low", f.low, "uniform: low")->capture_default_str();
  app.add_option("--high", f.high, "uniform: high")->capture_default_str();
  app.add_option("--start", f.start, "arange: first value")->capture_default_str();
  app.add_option("--step", f.step, "arange: step")->capture_default_str();
  app.add_option("--value", f.value, "constant: the value")->capture_default_str();
  app.add_option("--seed", job.seed, "Generator seed (normal, uniform)")->capture_default_str()
      ->transform(psched::cli::unsigned_in(0, UINT64_MAX));
  app.add_option("--scale", job.scale, "Expression: scale * x + offset")->capture_default_str();
  app.add_option("--offset", job.offset, "Expression: scale * x + offset")->capture_default_str();
  app.add_option("--row-start", f.row_start, "Selection: first row (negative: counted from the end)")
      ->transform(index);
  app.add_option("--row-stop", f.row_stop, "Selection: row stop (default: end; negative: from the end)")
      ->transform(index);
  app.add_option("--row-step", job.row_step, "Selection: row step")->capture_default_str()->transform(count);
  app.add_option("--col-start", f.col_start, "Selection: first column (negative: counted from the end)")
      ->transform(index);
  app.add_option("--col-stop", f.col_stop, "Selection: column stop (default: end; negative: from the end)")
      ->transform(index);
  app.add_option("--col-step", job.col_step, "Selection: column step")->capture_default_str()->transform(count);
  app.add_flag("--fused", job.fused,
               "Generate only the selected elements, storing nothing (reported separately; not the "
               "DeepOps benchmark's create-then-reduce)");
}

void add_output_flags(CLI::App& app, Flags& f) {
  app.add_option("--repeat", f.repeat, "Run the job N times in one session")->capture_default_str()
      ->transform(psched::cli::unsigned_in(1, 1000000));
  app.add_flag("--json", f.json, "Print one JSON object instead of text");
  app.add_option("--report", f.report_html,
                 "Write a self-contained HTML performance report of the (last) run to this file");
  app.add_option("--report-json", f.report_json, "Write the performance report's data as JSON to this file");
  app.add_flag("--check", f.check, "Verify the result: exact closed form for arange/constant, mean bound for "
                                   "normal/uniform; exit 1 on any difference");
  app.add_option("--verify", f.verify,
                 "Compute every chunk (or this fraction of them, a seeded draw) a second time on "
                 "another worker and compare the partials bit for bit; exit 1 on any mismatch")
      ->expected(0, 1)
      ->default_str("1.0")
      ->type_name("[FRACTION]");
  app.add_flag("-q,--quiet", f.quiet, "No progress bar");
  app.add_flag("--cluster-info", f.cluster_info, "Print the cluster's workers (backend, device, memory) and exit");
  app.add_option("--log-level", f.log_level, "Local mode: log level of the daemons")->capture_default_str();
}

int fail(const psched::Status& failure) { return psched::exit_on("pbench", failure); }

// The generator's parameters and the selection from their flags (Python's meaning: a negative
// start or stop counts from the end of its axis); throws pclient::Error for a job the scheduler
// would refuse.
void complete_job(Flags& f) {
  pclient::Job& job = f.job;
  if (job.generator == "normal") { job.param0 = f.mean; job.param1 = f.std_dev; }
  else if (job.generator == "uniform") { job.param0 = f.low; job.param1 = f.high; }
  else if (job.generator == "arange") { job.param0 = f.start; job.param1 = f.step; }
  else if (job.generator == "constant") { job.param0 = f.value; job.param1 = 0; }
  for (auto [given, length, field, name] :
       {std::tuple{&f.row_start, job.rows, &job.row_start, "--row-start"},
        std::tuple{&f.row_stop, job.rows, &job.row_stop, "--row-stop"},
        std::tuple{&f.col_start, job.cols, &job.col_start, "--col-start"},
        std::tuple{&f.col_stop, job.cols, &job.col_stop, "--col-stop"}}) {
    if (!*given) continue;
    auto index = psched::cli::from_end(**given, length);
    if (!index) throw pclient::Error(std::string(name) + ": " + index.message());
    *field = *index;
  }
  pclient::validate(job);
  if (psched::Status st = psched::validate_verify_fraction(f.verify); !st)
    throw pclient::Error("--verify: " + st.message());
}

// Local mode: starts psched and the workers, and points `connect` at them.
psched::Status start_local(const Flags& f, pbench::LocalCluster& local, pclient::ConnectOptions& connect) {
  pbench::LocalClusterOptions lo;
  lo.cpu_workers = f.cpus;
  lo.gpu_workers = f.gpus;
  lo.threads_per_worker = f.nthreads;
  lo.memory_limit = f.memory_limit;
  lo.log_level = f.log_level;
  lo.spin_us = f.spin_us;
  lo.tls = f.tls;
  if (psched::Status st = local.start(lo); !st) return st;
  connect.scheduler_file = local.scheduler_file();
  return psched::Status::ok();
}

// Ready when every local worker has registered; a worker that exits instead is an error.
psched::Result<std::vector<pclient::WorkerInfo>> wait_for_local_workers(pclient::Client& client,
                                                                        pbench::LocalCluster& local) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    std::vector<pclient::WorkerInfo> workers = client.workers();
    if (workers.size() >= size_t(local.workers())) return workers;
    if (psched::Status st = local.check_children(); !st) return st;
    if (std::chrono::steady_clock::now() > deadline)
      return psched::Status::error("local workers did not register within 120 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The job run --repeat times, and what the report needs.
struct Runs {
  std::vector<double> seconds;  // wall time of each run
  pclient::Result last;
  std::vector<pclient::WorkerInfo> before, after;  // the workers around the last run
  std::string problem;                             // --check: what is wrong (empty: ok)
  std::string verify_problem;                      // --verify: copies that differed (empty: none)
};

Runs run_jobs(pclient::Client& client, const Flags& f) {
  const bool tty = isatty(1) && isatty(2) && !f.json && !f.quiet;
  if (!f.json) {
    std::cout << "Array size: " << human_bytes(double(f.job.bytes())) << ".  Computing parallel sum . . ."
              << std::endl;
  }
  Runs runs;
  pclient::RunOptions run_options;
  run_options.no_workers_timeout_ms = f.no_workers_timeout_ms;
  run_options.on_progress = [tty, shown = pbench::WorkersShown{}](const pclient::Progress& p) mutable {
    if (const std::string line = pbench::workers_state_line(p, shown); !line.empty())
      std::fprintf(stderr, "%spbench: %s\n", tty ? "\n" : "", line.c_str());
    if (tty) draw_progress(p);
  };
  run_options.verify = f.verify;
  run_options.want_timeline = !f.report_html.empty() || !f.report_json.empty();
  for (int i = 0; i < f.repeat; ++i) {
    if (i == f.repeat - 1) runs.before = client.workers();  // the last run's own share
    runs.last = client.run(f.job, run_options);
    runs.seconds.push_back(runs.last.wall_seconds);
    if (tty) std::fprintf(stderr, "\r%80s\r", "");
  }
  runs.after = client.workers();
  const pclient::Result& r = runs.last;
  if (f.check) runs.problem = psched::check_result(pclient::job_spec_of(f.job), pclient::partial_of(r));
  runs.verify_problem = pbench::verify_problem(r);
  return runs;
}

void report_json(const Flags& f, const Runs& runs) {
  const pclient::Job& job = f.job;
  const pclient::Result& result = runs.last;
  const double seconds = runs.seconds.back();
  nlohmann::json out = {{"sum", result.sum},
                        {"exact_terms", result.exact_terms},
                        {"reference_key", psched::reference_key(pclient::job_spec_of(job))},
                        {"count", result.count},
                        {"mean", result.mean()},
                        {"min", result.min},
                        {"max", result.max},
                        {"seconds", seconds},
                        {"chunks", result.chunks},
                        {"bytes", job.bytes()},
                        {"bytes_per_second", double(job.bytes()) / seconds},
                        {"workers", result.workers},
                        {"cluster_workers", runs.after.size()},
                        {"retries", result.retries},
                        {"resubmissions", result.resubmissions},
                        {"generator", job.generator},
                        {"rows", job.rows},
                        {"cols", job.cols},
                        {"chunk_rows", job.chunk_rows},
                        {"chunk_cols", job.chunk_cols},
                        {"fused", job.fused},
                        {"devices", devices_json(runs.after, &runs.before, seconds)}};
  // Each device's share of the job as the scheduler measured it, GPU figures and stragglers.
  const nlohmann::json shares = pbench::run_devices_json(result);
  nlohmann::json stragglers = nlohmann::json::array();
  for (auto& d : out["devices"]) {
    for (const auto& s : shares)
      if (s["worker"] == d["name"]) d["run"] = s;
    // The per-heartbeat series is the report's (--report-json); the summary line stays short.
    if (d.contains("run") && d["run"]["gpu"].is_object()) d["run"]["gpu"].erase("series");
  }
  for (const auto& s : shares)
    if (s["slow"].get<bool>()) stragglers.push_back({{"worker", s["worker"]}, {"cause", s["cause"]}});
  out["stragglers"] = std::move(stragglers);
  if (f.repeat > 1) out["runs"] = runs.seconds;
  if (result.count == 0) {  // no mean, min or max of nothing: say so rather than print 0
    out["mean"] = nullptr;
    out["empty_selection"] = true;
  }
  if (f.check) out["check"] = runs.problem.empty() ? "ok" : runs.problem;
  if (f.verify > 0) out["verify"] = pbench::verify_json(result);
  std::cout << out.dump() << std::endl;
}

// The text report, worded as DeepOps' sum.py prints it, then what it does not say.
void report_text(const Flags& f, const Runs& runs) {
  const pclient::Result& result = runs.last;
  const double seconds = runs.seconds.back();
  std::cout << "Processing complete." << std::endl;
  std::printf("Wall time create data + computation time: %.6f seconds\n", seconds);
  if (result.count == 0)
    std::printf("Sum: 0  Count: 0 (the selection is empty: no mean, min or max)\n");
  else
    std::printf("Sum: %.17g  Mean: %.17g  Count: %llu  Min: %.17g  Max: %.17g\n", result.sum,
                result.mean(), (unsigned long long)result.count, result.min, result.max);
  std::printf("Throughput: %s/s over %s on %s%s\n", human_bytes(double(f.job.bytes()) / seconds).c_str(),
              psched::counted(result.chunks, "chunk").c_str(), psched::counted(result.workers, "worker").c_str(),
              f.job.fused ? " (fused: selected elements only)" : "");
  if (f.repeat > 1) {
    std::vector<double> sorted = runs.seconds;
    std::sort(sorted.begin(), sorted.end());
    std::printf("Runs: %d, median %.6f s, min %.6f s, max %.6f s\n", f.repeat, sorted[sorted.size() / 2],
                sorted.front(), sorted.back());
  }
  if (result.resubmissions > 0)
    std::printf("Resubmitted %u time%s after the connection to the scheduler was lost (--reconnect)\n",
                result.resubmissions, result.resubmissions == 1 ? "" : "s");
  std::printf("Cluster: %s\n", summarize(runs.after).c_str());
  double busy = 0;
  int active = 0;
  for (const auto& w : runs.after)
    if (const RunShare r = run_share(w, runs.before, seconds); r.chunks > 0) {
      busy += r.busy_fraction;
      ++active;
    }
  if (active > 0 && seconds > 0)
    std::printf("Busy: %s for %.0f%% of the wall time (mean; their own timings)\n",
                active == 1 ? "the worker computed" : ("the " + psched::counted(active, "worker") + " computed").c_str(),
                100.0 * busy / active);
  for (const auto& d : result.devices) {
    if (!d.has_gpu) continue;
    std::printf("GPU %s: SM clock %.0f/%.0f/%.0f MHz (max %u), %.0f-%.0f C, %.0f/%.0f/%.0f W, util %.0f%%%s%s\n",
                d.name.c_str(), d.sm_clock_mhz.min, d.sm_clock_mhz.mean, d.sm_clock_mhz.max, d.sm_clock_max_mhz,
                d.temperature_c.min, d.temperature_c.max, d.power_watts.min, d.power_watts.mean,
                d.power_watts.max, d.sm_utilisation_pct.mean, d.throttle_reasons ? ", throttled: " : "",
                psched::throttle_reason_names(d.throttle_reasons).c_str());
  }
  std::vector<std::string> slow;
  for (const auto& d : result.devices)
    if (d.slow) slow.push_back(d.name + " (" + human_bytes(d.bytes_per_second) + "/s" +
                               (d.cause.empty() ? "" : "; " + d.cause) + ")");
  if (result.devices.size() > 1) {
    std::string line;
    for (const auto& s : slow) line += (line.empty() ? "" : ", ") + s;
    std::printf("Stragglers (10%% or more below the median device): %s\n", slow.empty() ? "none" : line.c_str());
  }
  if (f.check) std::printf("Check: %s\n", runs.problem.empty() ? "ok" : runs.problem.c_str());
  if (f.verify > 0) pbench::print_verify(result);
  std::fflush(stdout);
}

// --report and --report-json: the last run's performance report (report.h).
psched::Status write_reports(const Flags& f, const Runs& runs) {
  if (f.report_html.empty() && f.report_json.empty()) return psched::Status::ok();
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::json report = pbench::report_json(f.job, runs.last, runs.after);
  std::string written;
  if (!f.report_json.empty()) {
    const std::string text = report.dump() + "\n";
    if (psched::Status st = pbench::write_file(f.report_json, text); !st) return st;
    written += f.report_json + " (" + std::to_string(text.size()) + " bytes) ";
  }
  if (!f.report_html.empty()) {
    const std::string page = pbench::report_html(report);
    if (psched::Status st = pbench::write_file(f.report_html, page); !st) return st;
    written += f.report_html + " (" + std::to_string(page.size()) + " bytes) ";
  }
  // On stderr: --json's stdout stays one object.
  std::fprintf(stderr, "Report: %swritten in %.3f s (%zu timeline segments)\n", written.c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               runs.last.timeline.size());
  return psched::Status::ok();
}

// Connects (starting the local cluster first in local mode), waits for the workers, runs and
// reports. Returns the exit code.
int run(const Flags& f, const std::string& token, pbench::LocalCluster& local) {
  pbench::install_cleanup_handlers();  // Ctrl-C, SIGTERM and SIGHUP stop pbench saying so
  pclient::ConnectOptions connect;
  connect.name = "pbench";
  connect.token = token;
  connect.connect_timeout_ms = f.connect_timeout_ms;
  connect.reconnect_ms = f.reconnect_s * 1000;
  connect.spin_us = f.spin_us;
  connect.tls_ca_file = f.tls.ca_file;
  connect.tls_cert_file = f.tls.cert_file;
  connect.tls_key_file = f.tls.key_file;
  if (f.local_mode()) {
    if (psched::Status st = start_local(f, local, connect); !st) return fail(st);
  } else {
    connect.address = f.scheduler;
    connect.scheduler_file = f.scheduler_file;
    // One timeout for the whole way to the scheduler, said once when there is something to wait for.
    connect.scheduler_file_timeout_ms = f.connect_timeout_ms;
    if (!f.scheduler_file.empty())
      if (psched::Status st = psched::check_scheduler_file_path(f.scheduler_file, false); !st) return fail(st);
    if (!f.scheduler_file.empty() && f.scheduler.empty())
      if (auto now = psched::read_scheduler_file(f.scheduler_file); !now)
        std::cerr << "pbench: waiting up to " << f.connect_timeout_ms << " ms for the scheduler file ("
                  << now.message() << ")" << std::endl;
    // No scheme: TLS exactly when --tls-* are given.
    if (f.scheduler.empty() && f.scheduler_file.empty()) connect.address = "127.0.0.1:8786";
  }
  pclient::Client client = pclient::Client::connect(connect);
  std::vector<pclient::WorkerInfo> workers;
  if (f.local_mode()) {
    auto ready = wait_for_local_workers(client, local);
    if (!ready) return fail(ready.status());
    workers = std::move(*ready);
  } else {
    workers = client.workers();
    if (workers.empty()) {
      const bool never = f.no_workers_timeout_ms <= 0;
      std::cerr << "pbench: no workers: waiting "
                << (never ? std::string("for ever") : fmt::format("up to {} s", f.no_workers_timeout_ms / 1000))
                << " for one to register with the scheduler (--no-workers-timeout)" << std::endl;
      workers = client.wait_for_workers(1, never ? INT_MAX : f.no_workers_timeout_ms);
    }
  }
  if (f.cluster_info) {
    print_workers(workers, f.json);
    client.close();
    return 0;
  }
  const Runs runs = run_jobs(client, f);
  if (psched::Status st = write_reports(f, runs); !st) return fail(st);
  if (f.json) {
    report_json(f, runs);
  } else {
    report_text(f, runs);
  }
  client.close();
  if (!runs.problem.empty()) return fail(psched::Status::error("check failed: " + runs.problem));
  if (!runs.verify_problem.empty()) return fail(psched::Status::error(runs.verify_problem));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"pbench: sum of (scale*x + offset)[r0:r1:rs, c0:c1:cs] over a generated 2-D array on a "
               "psched cluster, timed as DeepOps' sum.py (\"create data + computation\")."};
  app.set_version_flag("--version", std::string("pbench ") + PSCHED_VERSION);
  app.failure_message(psched::cli::one_line_failure("pbench"));
  add_mode_flags(app, flags);
  add_job_flags(app, flags);
  add_cluster_flags(app, flags);
  add_output_flags(app, flags);
  if (const std::optional<int> code = psched::cli::parse(app, argc, argv)) return *code;
  try {
    complete_job(flags);
  } catch (const pclient::Error& e) {
    return fail(psched::Status::invalid(e.what()));
  }

  // Warnings (a token file others can read) go to stderr, never into --json output.
  if (psched::Status st = psched::setup_logging("pbench", "warning"); !st) return fail(st);
  std::string token;
  if (!flags.token_file.empty()) {
    auto loaded = psched::load_token(flags.token_file);
    if (!loaded) return fail(loaded.status());
    token = *loaded;
  }

  pbench::LocalCluster local;
  int code = 0;
  try {
    code = run(flags, token, local);
  } catch (const pclient::Error& e) {
    code = fail(psched::Status::error(e.what()));
  }
  local.stop();
  return code;
}
