// EnergyMeter: what a worker's reports charge for energy. NVML's energy counter is read at each
// report, and what it advanced since the previous reading is charged to that report's batches, in
// proportion to their busy seconds; so a job's energy is the GPU's energy while it worked on the
// job, however short the job. A worker going from idle to busy starts a fresh mark, so the time it
// sat idle between jobs is charged to none. Without a counter (an old driver, a GPU without one)
// each busy second is charged the GPU's recent power (NvmlSampler::recent_watts), as before.
#pragma once

#include <cstdint>
#include <optional>

namespace psched {

class EnergyMeter {
 public:
  // Work starts after idle: the counter now (nullopt: none).
  void start(std::optional<uint64_t> counter_mj) { mark_mj_ = counter_mj; }

  // Joules per busy second for a report of `busy_seconds`, the counter reading `counter_mj` now;
  // `fallback_watts` where there is no counter or no earlier reading to measure from. A report of
  // no busy time leaves the mark where it was: what the counter advanced goes to the next one.
  double charge(std::optional<uint64_t> counter_mj, double busy_seconds, double fallback_watts) {
    if (busy_seconds <= 0) return 0;
    // No earlier reading, or a counter that went back (a driver reload): the fallback this once.
    const bool measured = counter_mj && mark_mj_ && *counter_mj >= *mark_mj_;
    const double joules = measured ? double(*counter_mj - *mark_mj_) / 1e3 : 0;
    mark_mj_ = counter_mj;
    return measured ? joules / busy_seconds : fallback_watts;
  }

 private:
  std::optional<uint64_t> mark_mj_;
};

}  // namespace psched
