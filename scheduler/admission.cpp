#include "scheduler/admission.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace psched {

Status admit_job(uint64_t chunks, const ChunkHoldings& held, const AdmissionLimits& limits) {
  if (held.client_chunks + chunks > limits.max_client_chunks)
    return Status::error(fmt::format(
        "client limit: your {} running jobs hold {} chunks; this job's {} more would pass one "
        "client's share of {} (submit it when some finish)",
        held.client_jobs, held.client_chunks, chunks, limits.max_client_chunks));
  if (held.all_chunks + chunks > limits.max_chunks)
    return Status::error(fmt::format(
        "scheduler busy: {} running jobs hold {} chunks; this job's {} more would pass the limit "
        "of {} (submit it when some finish)",
        held.all_jobs, held.all_chunks, chunks, limits.max_chunks));
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
