#include "scheduler/admission.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace psched {

Status admit_job(uint64_t client_jobs, uint64_t all_jobs, const AdmissionLimits& limits) {
  if (client_jobs >= limits.max_client_jobs)
    return Status::error(fmt::format(
        "client limit: you have {} running job{}, one client's most (psched --max-client-jobs {}); "
        "submit it when one finishes",
        client_jobs, client_jobs == 1 ? "" : "s", limits.max_client_jobs));
  if (all_jobs >= limits.max_jobs)
    return Status::error(fmt::format(
        "scheduler busy: {} running job{}, the most it holds (psched --max-jobs {}); submit it "
        "when some finish",
        all_jobs, all_jobs == 1 ? "" : "s", limits.max_jobs));
  return Status::ok();
}

void RateLimitedLog::warn(const std::string& line) {
  const auto now = std::chrono::steady_clock::now();
  if (last_ != std::chrono::steady_clock::time_point{} && now - last_ < interval_) {
    ++held_back_;
    return;
  }
  last_ = now;
  if (held_back_ > 0) {
    spdlog::warn("{} (and {} more like it since the last such line)", line, held_back_);
    held_back_ = 0;
  } else {
    spdlog::warn("{}", line);
  }
}

}  // namespace psched
