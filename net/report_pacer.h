// ReportPacer: when a worker sends the results it has (pcuda-worker's, and psched-loadgen's simulated
// ones). Every message costs the scheduler about the same whatever it carries, so a worker that
// reported each chunk as it finished cost a 1024-GPU fleet of 10000² chunks 1.5 M messages a second;
// instead a worker reports at most every kReportInterval, but at once when half of what it held at
// its last report is done (the scheduler must top it up before it runs dry; not while the
// scheduler said nothing else waits, TaskBatch.queueEmpty) or when it holds nothing more (a small
// job's last chunk never waits). The scheduler sizes each worker's window to
// several intervals of its measured speed (window_for, scheduler/window_depth.h), so a report per interval keeps
// the device busy; a worker killed loses at most an interval of finished results and what it was
// running (what its window held but had not started goes back to the queue), and progress moves
// every interval.
// The scheduler lengthens the interval as its fleet grows (TaskBatch.reportIntervalUs).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
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
  // Of `n` chunks done one every `chunk_seconds` from `first_done` on (done_at), each released as
  // it is done: the index of the first after which due() holds, or n when none does. What
  // psched-loadgen's simulated worker asks to walk a run of chunks at once instead of chunk by
  // chunk (bench/loadgen/sim_worker.cpp), so the rule it follows stays this one.
  uint64_t first_due(uint64_t n, Clock::time_point first_done, double chunk_seconds) const {
    uint64_t j = held_ == 0 ? 0 : held_ - 1;  // then nothing more is held
    if (halves_) j = std::min(j, held_ >= 1 + high_ / 2 ? held_ - 1 - high_ / 2 : uint64_t{0});
    j = std::min(j, n);
    if (done_at(first_done, chunk_seconds, 0) - last_ >= interval_) return 0;
    if (!(chunk_seconds > 0) || j == 0) return j;  // every chunk done at first_done, or due at once
    // The interval: from the quotient, then stepped to the clock's ticks (done_at truncates).
    const double wait = std::chrono::duration<double>(deadline() - first_done).count() / chunk_seconds;
    uint64_t t = wait < double(j) ? uint64_t(std::ceil(wait)) : j;
    while (t > 0 && done_at(first_done, chunk_seconds, t - 1) - last_ >= interval_) --t;
    while (t < j && done_at(first_done, chunk_seconds, t) - last_ < interval_) ++t;
    return t;
  }
  // When the j-th of chunks done one every `chunk_seconds` from `first` on is done, on the clock.
  static Clock::time_point done_at(Clock::time_point first, double chunk_seconds, uint64_t j) {
    return first + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(double(j) * chunk_seconds));
  }
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
