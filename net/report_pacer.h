// ReportPacer: when a worker sends the results it has (pcuda-worker's, and psched-loadgen's simulated
// ones). Every message costs the scheduler about the same whatever it carries, so a worker that
// reported each chunk as it finished cost a 1024-GPU fleet of 10000² chunks 1.5 M messages a second;
// instead a worker reports at most every kReportInterval, but at once when half of what it held at
// its last report is done (the scheduler must top it up before it runs dry; not while the
// scheduler said nothing else waits, TaskBatch.queueEmpty) or when it holds nothing more (a small
// job's last chunk never waits). The scheduler sizes each worker's window to
// several intervals of its measured speed (WorkerRecord::window_for), so a report per interval keeps
// the device busy; a worker killed loses at most an interval of finished results and what it was
// running (what its window held but had not started goes back to the queue), and progress moves
// every interval.
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
  // dropped with their job). An idle worker's interval starts with its work: its first result waits
  // like any other (reporting it at once cost a 1024-GPU fleet a message per worker per job).
  void assigned(uint64_t n, Clock::time_point now) {
    if (held_ == 0) last_ = now;
    held_ += n;
    if (held_ > high_) high_ = held_;
  }
  void released(uint64_t n) { held_ = n < held_ ? held_ - n : 0; }
  uint64_t held() const { return held_; }
  uint64_t high() const { return high_; }

  // What each TaskBatch says: the scheduler's interval (reportIntervalUs; 0: kReportInterval), and
  // whether anything else waited there (queueEmpty: then a report at half would bring nothing).
  void on_task_batch(uint32_t interval_us, bool queue_empty) {
    interval_ = interval_us > 0 ? std::chrono::microseconds(interval_us) : kReportInterval;
    halves_ = !queue_empty;
  }
  // Whether a report is due once half of what was held at the last one is done.
  bool halves() const { return halves_; }
  // Whether results waiting since the last report should go now.
  bool due(Clock::time_point now) const {
    return held_ == 0 || (halves_ && 2 * held_ <= high_) || now - last_ >= interval_;
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
  bool halves_ = true;
};

}  // namespace psched
