#include "net/event_loop.h"

#include <sched.h>

namespace psched {

void spin_pause() { sched_yield(); }

size_t run_one_spinning(boost::asio::io_context& io, std::chrono::microseconds spin) {
  if (spin.count() > 0) {
    const auto until = std::chrono::steady_clock::now() + spin;
    do {
      if (const size_t n = io.poll_one(); n > 0) return n;
      if (io.stopped()) return 0;
      spin_pause();
    } while (std::chrono::steady_clock::now() < until);
  }
  return io.run_one();
}

void run_spinning(boost::asio::io_context& io, std::chrono::microseconds spin) {
  if (spin.count() <= 0) {
    io.run();
    return;
  }
  while (run_one_spinning(io, spin) > 0) {
    // After a handler, drain whatever else is ready before the next spin window starts.
    while (io.poll() > 0) {
    }
  }
}

}  // namespace psched
