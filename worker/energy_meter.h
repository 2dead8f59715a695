// EnergyMeter: what a worker's reports charge for energy. At each report the GPU's energy counter
// is read (NvmlSampler::energy_joules: its latest reading, at most 50 ms old, carried to now at the
// recent power) and what it advanced since the previous report is charged to that report's
// batches, in proportion to their busy seconds; so a job's energy is the GPU's energy while it
// worked on the job, however short the job. A worker going from idle to busy starts a fresh mark,
// so the time it sat idle between jobs is charged to none. Without a counter (an old driver, a GPU
// without one) each busy second is charged the GPU's recent power (NvmlSampler::recent_watts).
#pragma once

#include <optional>

namespace psched {

class EnergyMeter {
 public:
  // Work starts after idle: the counter now, in joules (nullopt: none).
  void start(std::optional<double> counter_joules) { mark_ = counter_joules; }

  // Joules per busy second for a report of `busy_seconds`, the counter reading `counter_joules` now;
  // `fallback_watts` where there is no counter or no earlier reading to measure from. A report of
  // no busy time leaves the mark where it was: what the counter advanced goes to the next one. A
  // reading below the mark (the estimate carried past a reading that then came in lower) charges
  // nothing and keeps the mark, so the reports' charges still add up to the counter's advance.
  double charge(std::optional<double> counter_joules, double busy_seconds, double fallback_watts) {
    if (busy_seconds <= 0) return 0;
    if (!counter_joules || !mark_) {
      mark_ = counter_joules;
      return fallback_watts;
    }
    if (*counter_joules < *mark_) return 0;
    const double joules = *counter_joules - *mark_;
    mark_ = counter_joules;
    return joules / busy_seconds;
  }

 private:
  std::optional<double> mark_;
};

}  // namespace psched
