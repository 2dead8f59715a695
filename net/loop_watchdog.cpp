#include "net/loop_watchdog.h"

#include <algorithm>

namespace psched {

void LoopWatchdog::start(std::function<void(double)> on_stall) {
  on_stall_ = std::move(on_stall);
  running_ = true;
  due_ = Clock::now();
  tick();  // due now, so no stall: it only arms the first tick
}

void LoopWatchdog::stop() {
  running_ = false;
  timer_.cancel();
}

void LoopWatchdog::tick() {
  if (!running_) return;
  const auto now = Clock::now();
  if (now - due_ > kLateAfter) {
    // The loop ran nothing (or one handler ran long) from about the due time until now.
    const double seconds = std::chrono::duration<double>(now - due_).count();
    stall_end_ = now;
    ++stalls_;
    stalled_seconds_ += seconds;
    if (on_stall_) on_stall_(seconds);
  }
  due_ = now + kTick;
  timer_.expires_at(due_);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

LoopWatchdog::Clock::time_point LoopWatchdog::silent_since(Clock::time_point heard,
                                                           Clock::time_point now) const {
  if (overdue(now)) return now;  // waking from a stall this very moment: nobody is judged yet
  return std::max(heard, stall_end_);
}

}  // namespace psched
