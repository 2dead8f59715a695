#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "net/event_loop.h"

using namespace psched;
using namespace std::chrono_literals;

TEST_CASE("run_spinning runs every handler and returns when the loop runs out of work", "[event_loop]") {
  for (const auto spin : {0us, 200us}) {
    boost::asio::io_context io;
    int ran = 0;
    for (int i = 0; i < 5; ++i)
      boost::asio::post(io, [&] {
        ++ran;
        if (ran == 5) boost::asio::post(io, [&] { ++ran; });  // work queued by a handler
      });
    run_spinning(io, spin);
    REQUIRE(ran == 6);
    REQUIRE(io.stopped());
  }
}

TEST_CASE("run_spinning sleeps past its spin window and still wakes for a later event", "[event_loop]") {
  boost::asio::io_context io;
  boost::asio::steady_timer timer(io, 30ms);  // far beyond the 100 us window
  bool fired = false;
  timer.async_wait([&](const boost::system::error_code& ec) { fired = !ec; });
  run_spinning(io, 100us);
  REQUIRE(fired);
}

TEST_CASE("run_spinning returns on stop even with work still pending", "[event_loop]") {
  boost::asio::io_context io;
  boost::asio::steady_timer never(io, std::chrono::hours(1));
  never.async_wait([](const boost::system::error_code&) {});
  boost::asio::steady_timer soon(io, 5ms);
  soon.async_wait([&](const boost::system::error_code&) { io.stop(); });
  run_spinning(io, 1000us);
  REQUIRE(io.stopped());
}

TEST_CASE("run_one_spinning picks up a handler posted from another thread", "[event_loop]") {
  boost::asio::io_context io;
  auto guard = boost::asio::make_work_guard(io);
  std::atomic<bool> ran{false};
  std::thread other([&] {
    std::this_thread::sleep_for(2ms);  // the poster's delay; the loop waits for it either way
    boost::asio::post(io, [&] { ran = true; });
  });
  while (!ran) REQUIRE(run_one_spinning(io, 500us) <= 1);
  other.join();
  REQUIRE(ran);
}

TEST_CASE("spin_until reports whether the condition came true within the window", "[event_loop]") {
  REQUIRE(spin_until([] { return true; }, 0us));
  REQUIRE_FALSE(spin_until([] { return false; }, 0us));
  REQUIRE_FALSE(spin_until([] { return false; }, 200us));
  std::atomic<bool> flag{false};
  std::thread setter([&] { flag = true; });
  setter.join();
  REQUIRE(spin_until([&] { return flag.load(); }, 1000000us));
}
