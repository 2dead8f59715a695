// LoopWatchdog: how late an event loop runs, so that a daemon never blames a peer for its own
// stall. A peer is judged dead by its silence (FramedConnection::set_idle_timeout); but when the
// loop itself did not run (the process was stopped, a VM paused, a swap storm, a debugger, one
// handler that took seconds), the peers' heartbeats sit unread in their sockets, and judging them
// on waking would drop every healthy worker at once. So the watchdog ticks every kTick; a tick
// later than kLateAfter past its due time marks a stall, and a peer's silence counts only from the
// stall's end: after a stall, what has arrived is read before anyone is judged, and every peer has
// its whole timeout again. While the first tick after a stall has not run yet (other handlers of
// the same wake-up may run first), the overdue tick is itself the sign.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>

namespace psched {

class LoopWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // 5 ticks a second cost an idle daemon nothing measurable; a loop 300 ms late is not one that
  // merely had a busy moment (a large job's Submit, a burst of results, a loaded 2-core machine).
  static constexpr std::chrono::milliseconds kTick{200};
  static constexpr std::chrono::milliseconds kLateAfter{300};

  explicit LoopWatchdog(boost::asio::io_context& io) : timer_(io) {}

  // Starts ticking; on_stall(seconds) runs on the loop once per stall seen (to log it).
  void start(std::function<void(double seconds)> on_stall = {});
  void stop();

  // Since when a peer last heard from at `heard` has been silent, as far as it can be blamed: the
  // later of `heard` and the end of the loop's last stall (`now` while one is being woken from).
  Clock::time_point silent_since(Clock::time_point heard, Clock::time_point now) const;

  uint64_t stalls() const { return stalls_; }
  double stalled_seconds() const { return stalled_seconds_; }  // over every stall seen

 private:
  void tick();
  bool overdue(Clock::time_point now) const { return running_ && now - due_ > kLateAfter; }

  boost::asio::steady_timer timer_;
  std::function<void(double)> on_stall_;
  bool running_ = false;
  Clock::time_point due_{};         // when the pending tick should run
  Clock::time_point stall_end_{};   // when the loop last woke from a stall
  uint64_t stalls_ = 0;
  double stalled_seconds_ = 0;
};

}  // namespace psched
