#include "core/burn_status.h"

#include <fmt/format.h>

#include <cmath>

#include "core/worker_info.h"

namespace psched {

namespace {

// pbench --burn runs 30 days at most (parse_burn_duration); a little more for the end's report.
constexpr double kMaxBurnSeconds = 31 * 86400.0;

bool printable_line(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

bool sane_figure(double x, double most) { return std::isfinite(x) && x >= 0 && x <= most; }

}  // namespace

const char* burn_verdict_name(BurnVerdict v) {
  switch (v) {
    case BurnVerdict::kPass: return "pass";
    case BurnVerdict::kWarn: return "warn";
    case BurnVerdict::kFail: return "fail";
  }
  return "?";
}

Status validate(const BurnStatus& burn) {
  if (burn.gpus.size() > kMaxBurnGpus)
    return Status::invalid(fmt::format("burn status: {} GPUs, at most {}", burn.gpus.size(), kMaxBurnGpus));
  if (!sane_figure(burn.elapsed_seconds, kMaxBurnSeconds) || !sane_figure(burn.total_seconds, kMaxBurnSeconds))
    return Status::invalid(fmt::format("burn status: elapsed {} s of {} s, expected 0 to {} s", burn.elapsed_seconds,
                                       burn.total_seconds, kMaxBurnSeconds));
  for (const BurnGpuStatus& g : burn.gpus) {
    if (g.worker.empty() || g.worker.size() > kMaxPeerNameBytes || !printable_line(g.worker))
      return Status::invalid(fmt::format("burn status: a worker name of {} bytes, expected 1 to {} printable",
                                         g.worker.size(), kMaxPeerNameBytes));
    if (g.reason.size() > kMaxBurnReasonBytes || !printable_line(g.reason))
      return Status::invalid(fmt::format("burn status: '{}''s reason of {} bytes, expected at most {} printable",
                                         g.worker, g.reason.size(), kMaxBurnReasonBytes));
    if (!sane_figure(g.bytes_per_second, 1e18))
      return Status::invalid(fmt::format("burn status: '{}' at {} B/s, expected 0 to 1e18", g.worker,
                                         g.bytes_per_second));
  }
  return Status::ok();
}

}  // namespace psched
