#include "run_output.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "client/figures.h"
#include "cluster_report.h"
#include "core/gpu_health.h"
#include "core/plural.h"
#include "verify_report.h"

namespace pbench {

pclient::ResultJsonInput result_input(const Flags& f, const Runs& runs) {
  return {.job = f.job,
          .result = runs.last,
          .seconds = runs.seconds.back(),
          .before = &runs.before,
          .after = &runs.after,
          .ddof = f.ddof,
          .verify = f.verify > 0};
}

void print_json(const Flags& f, const Runs& runs) {
  // The job result (client/result_json.h: its keys are pbench's, Python's and the report's), the
  // GPUs' per-heartbeat series left to the report: the line stays short.
  nlohmann::json out = pclient::result_json(result_input(f, runs));
  if (f.repeat > 1) out["runs"] = runs.seconds;
  if (f.check) out["check"] = runs.problem.empty() ? "ok" : runs.problem;
  std::cout << out.dump() << std::endl;
}

void print_text(const Flags& f, const Runs& runs) {
  const pclient::Result& result = runs.last;
  const double seconds = runs.seconds.back();
  std::cout << "Processing complete." << std::endl;
  // DeepOps' words for a generated array; a stored one is read, not created.
  std::printf("Wall time %s data + computation time: %.6f seconds\n", f.job.input.path.empty() ? "create" : "read",
              seconds);
  if (result.count == 0)
    std::printf("Sum: 0  Count: 0 (the selection is empty: no mean, min or max)\n");
  else
    std::printf("Sum: %.17g  Mean: %.17g  Count: %llu  Min: %.17g  Max: %.17g\n", result.sum,
                result.mean(), (unsigned long long)result.count, result.min, result.max);
  for (const pclient::FigureDef& figure : pclient::kFigures) {  // those of their own line, in the table's order
    if (figure.label.empty() || !f.wants(figure)) continue;
    std::printf("%.*s: %.17g", int(figure.label.size()), figure.label.data(), figure.value(result, f.ddof));
    if (figure.ddof) std::printf("  (ddof %u)", f.ddof);
    std::printf("\n");
  }
  std::printf("Throughput: %s/s over %s on %s%s\n", human_bytes(double(f.job.bytes()) / seconds).c_str(),
              psched::counted(result.chunks, "chunk").c_str(), psched::counted(result.workers, "worker").c_str(),
              f.job.fused ? " (fused: selected elements only)" : "");
  if (const double joules = result.energy_joules(); joules > 0)
    std::printf("Energy: %.0f J on the GPUs, %.0f J per TB, %.0f W mean (NVML)\n", joules,
                joules / (double(f.job.bytes()) / 1e12), seconds > 0 ? joules / seconds : 0.0);
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
    if (const pclient::RunShare r = pclient::run_share(w, runs.before, seconds); r.chunks > 0) {
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

}  // namespace pbench
