// ReportPacer: when a worker sends the results it has (pcuda-worker's, and psched-loadgen's simulated
// ones). Every message costs the scheduler about the same whatever it carries, so a worker that
// reported each chunk as it finished cost a 1024-GPU fleet of 10000² chunks 1.5 M messages a second;
// instead a worker reports at most every kReportInterval, but at once when half of what it held at
// its last report is done (the scheduler must top it up before it runs dry) or when it holds
// nothing more (a small job's last chunk never waits). The scheduler sizes each worker's window to
// several intervals of its measured speed (WorkerRecord::window_for), so a report per interval keeps
// the device busy; a worker killed loses at most a window of work, and progress moves every interval.
// The scheduler lengthens the interval as its fleet grows (TaskBatch.reportIntervalUs).
#pragma once

#include <chrono>
#include <cstdint>

namespace psched {

// The longest a finished result waits on its worker before it is sent, unless the scheduler says
// longer (TaskBatch.reportIntervalUs: with thousands of workers it cannot take a report from each
// every 5 ms; Scheduler::report_interval).
inline constexpr std::chrono::microseconds kReportInterval{5000};

class ReportPacer {
 public:
  using Clock = std::chrono::steady_clock;

  // Chunks handed to the worker (TaskBatch), and chunks it no longer holds (finished, failed or
  // dropped with their job).
  void assigned(uint64_t n) {
    held_ += n;
    if (held_ > high_) high_ = held_;
  }
  void released(uint64_t n) { held_ = n < held_ ? held_ - n : 0; }
  uint64_t held() const { return held_; }
  uint64_t high() const { return high_; }

  // The scheduler's interval (TaskBatch.reportIntervalUs; 0: kReportInterval).
  void set_interval_us(uint32_t us) {
    interval_ = us > 0 ? std::chrono::microseconds(us) : kReportInterval;
  }
  // Whether results waiting since the last report should go now.
  bool due(Clock::time_point now) const {
    return held_ == 0 || 2 * held_ <= high_ || now - last_ >= interval_;
  }
  // When they go at the latest (if nothing changes before).
  Clock::time_point deadline() const { return last_ + interval_; }
  // A report went out: the interval and the high-water mark start again.
  void reported(Clock::time_point now) {
    last_ = now;
    high_ = held_;
  }

 private:
  uint64_t held_ = 0;
  uint64_t high_ = 0;  // most chunks held since the last report
  Clock::time_point last_{};
  std::chrono::microseconds interval_ = kReportInterval;
};

}  // namespace psched
