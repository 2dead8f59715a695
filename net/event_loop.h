// Event loops that stay awake a moment after each event. A request/response across our processes
// (client -> psched -> worker -> psched -> client) wakes a sleeping thread at every hop; on a
// virtual machine an idle vCPU takes tens of microseconds to wake (halt, VM exit, host wake-up),
// several times the rest of a small job's round trip (bench/README.md has the measurements).
// Polling for a short spin window after each burst of handlers, yielding the CPU between polls,
// keeps the next hop's wake-up off that path; once the window passes the thread blocks as before,
// so an idle daemon costs nothing. spin = 0 is plain io_context::run().
#pragma once

#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstddef>

namespace psched {

// The default spin window of our daemons and client (--spin-us): a few wake-ups' worth.
inline constexpr std::chrono::microseconds kDefaultSpin{100};

// io.run(), polling for up to `spin` after the last handler before blocking.
void run_spinning(boost::asio::io_context& io, std::chrono::microseconds spin);

// io.run_one(), polling for up to `spin` before blocking. Returns the handlers run (0 when the
// loop ran out of work or was stopped).
size_t run_one_spinning(boost::asio::io_context& io, std::chrono::microseconds spin);

// Waits until ready() is true, checking it for up to `spin` (yielding between checks); returns
// whether it became true within the window. For a thread about to block on a condition variable.
template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::microseconds spin);

void spin_pause();  // one yield of the CPU between checks

template <typename Ready>
bool spin_until(Ready&& ready, std::chrono::microseconds spin) {
  if (spin.count() <= 0) return ready();
  const auto until = std::chrono::steady_clock::now() + spin;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    spin_pause();
  }
}

}  // namespace psched
