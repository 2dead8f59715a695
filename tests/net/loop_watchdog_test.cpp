// LoopWatchdog: a loop that did not run is seen as a stall, and silence is counted from its end.
// The stalls here are handlers that block the loop (the stimulus itself), not synchronisation.
#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <thread>

#include "net/loop_watchdog.h"

using namespace psched;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// Runs the loop until `until` (a timer ends it).
void run_for(boost::asio::io_context& io, std::chrono::milliseconds d) {
  boost::asio::steady_timer end(io, d);
  end.async_wait([&](const boost::system::error_code&) { io.stop(); });
  io.restart();
  io.run();
}

}  // namespace

TEST_CASE("a loop that keeps running sees no stall and counts silence from the last message", "[watchdog]") {
  boost::asio::io_context io;
  LoopWatchdog watchdog(io);
  int stalls_logged = 0;
  watchdog.start([&](double) { ++stalls_logged; });
  const auto heard = Clock::now();
  run_for(io, 700ms);
  CHECK(watchdog.stalls() == 0);
  CHECK(stalls_logged == 0);
  CHECK(watchdog.silent_since(heard, Clock::now()) == heard);
  watchdog.stop();
}

TEST_CASE("after a handler blocks the loop for a second, silence counts from the stall's end", "[watchdog]") {
  boost::asio::io_context io;
  LoopWatchdog watchdog(io);
  double logged_seconds = 0;
  watchdog.start([&](double s) { logged_seconds = s; });
  const auto heard = Clock::now();
  Clock::time_point judged_right_after{}, woke{};
  boost::asio::post(io, [&] {
    std::this_thread::sleep_for(1000ms);  // the stall
    woke = Clock::now();
    // Handlers of the same wake-up that run before the watchdog's tick already see it.
    boost::asio::post(io, [&] { judged_right_after = watchdog.silent_since(heard, Clock::now()); });
  });
  run_for(io, 1600ms);
  CHECK(judged_right_after >= woke);
  REQUIRE(watchdog.stalls() == 1);
  CHECK(logged_seconds >= 0.6);  // the tick was due 200 ms in, the loop woke at 1000 ms
  CHECK(logged_seconds < 1.2);
  CHECK(watchdog.stalled_seconds() == Approx(logged_seconds));
  // Later on, silence is counted from the stall's end, not from the message before it.
  CHECK(watchdog.silent_since(heard, Clock::now()) >= woke);
  // A message after the stall counts as itself.
  const auto later = Clock::now();
  CHECK(watchdog.silent_since(later, later) == later);
  watchdog.stop();
}

TEST_CASE("a stopped watchdog judges by the message alone", "[watchdog]") {
  boost::asio::io_context io;
  LoopWatchdog watchdog(io);
  const auto heard = Clock::now() - 10s;
  CHECK(watchdog.silent_since(heard, Clock::now()) == heard);
}
