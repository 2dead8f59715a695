// pbench: the DeepOps benchmark (sum.py) and friends on a psched cluster. Local mode (-c N,
// -g N) starts its own cluster; -d uses a running one (--scheduler or --scheduler-file). Its flags
// are flags.*, what it prints after the runs run_output.*.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "app/cli_checks.h"
#include "app/exit_codes.h"
#include "app/logging.h"
#include "burn.h"
#include "client/job_spec_of.h"
#include "client/workers_state.h"
#include "cluster_report.h"
#include "core/closed_form.h"
#include "flags.h"
#include "local_cluster.h"
#include "net/scheduler_file.h"
#include "net/token.h"
#include "pclient/client.h"
#include "report.h"
#include "run_output.h"
#include "verify_report.h"
#include "write_array.h"

namespace {

using pbench::draw_progress;
using pbench::Flags;
using pbench::human_bytes;
using pbench::print_workers;
using pbench::Runs;

int fail(const psched::Status& failure) { return psched::exit_on("pbench", failure); }

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
psched::StatusOr<std::vector<pclient::WorkerInfo>> wait_for_local_workers(pclient::Client& client,
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

Runs run_jobs(pclient::Client& client, const Flags& f) {
  const bool tty = isatty(1) && isatty(2) && !f.json && !f.quiet;
  if (!f.json) {
    std::cout << "Array size: " << human_bytes(double(f.job.bytes())) << ".  Computing parallel sum . . ."
              << std::endl;
  }
  Runs runs;
  pclient::RunOptions run_options;
  run_options.no_workers_timeout_ms = f.no_workers_timeout_ms;
  run_options.on_progress = [tty, shown = pclient::WorkersShown{}](const pclient::Progress& p) mutable {
    if (const std::string line = pclient::workers_state_line(p, shown); !line.empty())
      std::fprintf(stderr, "%spbench: %s\n", tty ? "\n" : "", line.c_str());
    for (const std::string& notice : p.notices) std::fprintf(stderr, "%spbench: %s\n", tty ? "\n" : "", notice.c_str());
    if (tty) draw_progress(p);
  };
  run_options.verify = f.verify;
  run_options.want_partials = f.want_partials;
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

// --report and --report-json: the last run's performance report (report.h).
psched::Status write_reports(const Flags& f, const Runs& runs) {
  if (f.report_html.empty() && f.report_json.empty()) return psched::Status::ok();
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::json report = pbench::report_json(pbench::result_input(f, runs));
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
      try {
        workers = client.wait_for_workers(1, never ? INT_MAX : f.no_workers_timeout_ms);
      } catch (const pclient::Error&) {
        if (!client.workers().empty()) throw;
        return fail(psched::Status::error(fmt::format(
            "no workers: none registered within {} s, so nothing was submitted (a longer --no-workers-timeout "
            "waits longer)",
            f.no_workers_timeout_ms / 1000)));
      }
    }
  }
  if (f.cluster_info) {
    print_workers(workers, f.json);
    client.close();
    return 0;
  }
  if (f.burn_seconds > 0) {
    const int code = pbench::run_burn(client, connect, f, f.local_mode() ? &local : nullptr);
    client.close();
    return code;
  }
  const Runs runs = run_jobs(client, f);
  if (psched::Status st = write_reports(f, runs); !st) return fail(st);
  if (f.json) {
    pbench::print_json(f, runs);
  } else {
    pbench::print_text(f, runs);
  }
  client.close();
  if (!runs.problem.empty()) return fail(psched::Status::error("check failed: " + runs.problem));
  if (!runs.verify_problem.empty()) return fail(psched::Status::error(runs.verify_problem));
  return 0;
}

// --write-npy / --write-zarr: the generated array into files, no cluster needed.
int write_array(const Flags& f) {
  const psched::JobSpec spec = psched::normalized(pclient::job_spec_of(f.job));
  const auto t0 = std::chrono::steady_clock::now();
  const bool npy = !f.write_npy.empty();
  const std::string& path = npy ? f.write_npy : f.write_zarr;
  if (psched::Status st = npy ? pbench::write_npy(spec, path) : pbench::write_zarr(spec, path, f.compressor); !st)
    return fail(st);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << fmt::format("Wrote {} ({} x {} {}, {}) in {:.2f} s", path, spec.rows, spec.cols,
                           psched::dtype_name(spec.dtype), human_bytes(double(spec.bytes())), seconds)
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"pbench: sum of (scale*x + offset)[r0:r1:rs, c0:c1:cs] over a generated 2-D array on a "
               "psched cluster, timed as DeepOps' sum.py (\"create data + computation\")."};
  app.set_version_flag("--version", std::string("pbench ") + PSCHED_VERSION);
  app.failure_message(psched::cli::one_line_failure("pbench"));
  pbench::add_flags(app, flags);
  if (const std::optional<int> code = psched::cli::parse(app, argc, argv)) return *code;
  try {
    complete_job(flags, app);
    if (const char* partials = std::getenv("PSCHED_TEST_WANT_PARTIALS"))  // test only, never a flag
      flags.want_partials = std::string(partials) == "1";
  } catch (const pclient::Error& e) {
    return fail(psched::Status::invalid(e.what()));
  }
  if (!flags.write_npy.empty() || !flags.write_zarr.empty()) return write_array(flags);

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
