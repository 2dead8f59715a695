// SchedulerLink (net/scheduler_link.h): the one way a peer connects to the scheduler. Against a real
// listening socket on loopback: where() asked at each attempt, failures as one line naming the
// address (a usage error keeps its code), the connection handed over for Hello, messages in, and
// nothing reaching the owner after stop().
#include <catch2/catch.hpp>

#include <boost/asio.hpp>
#include <capnp/message.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "net/framing.h"
#include "net/scheduler_link.h"

using namespace psched;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// What the link told its owner.
struct Seen {
  int where = 0, opened = 0, messages = 0, closed = 0;
  std::optional<Status> closed_why;
  bool closed_open = false;
  std::optional<wire::Message::Which> last_message;
};

SchedulerLink::Handlers record(Seen& seen, std::function<StatusOr<Address>()> where) {
  return {[&seen, where] {
            ++seen.where;
            return where();
          },
          [&seen](FramedConnection& c) {
            ++seen.opened;
            send_message(c, [](wire::Message::Builder m) { m.initHeartbeat(); });  // our "Hello"
          },
          [&seen](wire::Message::Reader m) {
            ++seen.messages;
            seen.last_message = m.which();
          },
          [&seen](const Status& why, bool was_open) {
            ++seen.closed;
            seen.closed_why = why;
            seen.closed_open = was_open;
          }};
}

// Runs the loop until `done()` or 5 s (a test that hangs fails instead).
template <typename Done>
void run_until(asio::io_context& io, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
}

Address loopback(uint16_t port) { return Address{"127.0.0.1", port, Scheme::kTcp}; }

}  // namespace

TEST_CASE("where() is asked at each attempt, and its usage error reaches the owner with its code", "[link]") {
  asio::io_context io;
  Seen seen;
  SchedulerLink link(io, nullptr, kDefaultMaxFrameBytes,
                     record(seen, [] { return StatusOr<Address>(Status::invalid("--scheduler: 'x:y' is no port")); }));
  link.connect();
  CHECK(seen.closed == 0);  // told on the next turn, never from inside connect()
  run_until(io, [&] { return seen.closed == 1; });
  REQUIRE(seen.closed_why);
  CHECK(seen.closed_why->code() == StatusCode::kInvalid);
  CHECK(seen.closed_why->message() == "--scheduler: 'x:y' is no port");
  CHECK_FALSE(seen.closed_open);
  link.connect();
  run_until(io, [&] { return seen.closed == 2; });
  CHECK(seen.where == 2);
  CHECK(seen.opened == 0);
}

TEST_CASE("a refused connection is one line naming the address", "[link]") {
  asio::io_context io;
  uint16_t port = 0;
  {
    tcp::acceptor closed_again(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    port = closed_again.local_endpoint().port();
  }
  Seen seen;
  SchedulerLink link(io, nullptr, kDefaultMaxFrameBytes,
                     record(seen, [port] { return StatusOr<Address>(loopback(port)); }));
  link.connect();
  run_until(io, [&] { return seen.closed == 1; });
  REQUIRE(seen.closed_why);
  CHECK(seen.closed_why->code() == StatusCode::kFailed);
  CHECK_THAT(seen.closed_why->message(),
             Catch::StartsWith("cannot connect to scheduler tcp://127.0.0.1:" + std::to_string(port) + ": "));
  CHECK_FALSE(seen.closed_open);
  CHECK(link.conn() == nullptr);
}

TEST_CASE("a connection is handed over for Hello, messages arrive, and after stop() none reach the owner", "[link]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  std::shared_ptr<FramedConnection> server;
  int hellos = 0;
  acceptor.async_accept([&](const boost::system::error_code& ec, tcp::socket socket) {
    REQUIRE_FALSE(ec);
    server = std::make_shared<FramedConnection>(std::move(socket), kDefaultMaxFrameBytes);
    server->start({[&](wire::Message::Reader m) {
                     if (m.which() != wire::Message::HEARTBEAT) return;
                     ++hellos;
                     send_message(*server, [](wire::Message::Builder out) { out.initGoodbye().setReason("test"); });
                   },
                   [](const std::string&) {}});
  });
  Seen seen;
  SchedulerLink link(io, nullptr, kDefaultMaxFrameBytes,
                     record(seen, [port] { return StatusOr<Address>(loopback(port)); }));
  link.connect();
  run_until(io, [&] { return seen.messages == 1; });
  CHECK(seen.opened == 1);
  CHECK(hellos == 1);
  CHECK(seen.last_message == wire::Message::GOODBYE);
  REQUIRE(link.conn() != nullptr);
  CHECK(link.address().to_string() == "tcp://127.0.0.1:" + std::to_string(port));

  // The owner stops the link; the scheduler's side closing is no longer its news.
  link.stop();
  server->close("scheduler closes");
  run_until(io, [&] { return !link.conn()->is_open(); });
  CHECK_FALSE(link.conn()->is_open());
  CHECK(seen.closed == 0);
}

TEST_CASE("the open connection closing is told once, as was_open", "[link]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const uint16_t port = acceptor.local_endpoint().port();
  std::optional<tcp::socket> accepted;
  acceptor.async_accept([&](const boost::system::error_code& ec, tcp::socket socket) {
    REQUIRE_FALSE(ec);
    accepted.emplace(std::move(socket));
  });
  Seen seen;
  SchedulerLink link(io, nullptr, kDefaultMaxFrameBytes,
                     record(seen, [port] { return StatusOr<Address>(loopback(port)); }));
  link.connect();
  run_until(io, [&] { return seen.opened == 1 && accepted.has_value(); });
  accepted->close();
  run_until(io, [&] { return seen.closed == 1; });
  CHECK(seen.closed_open);
  CHECK(seen.opened == 1);
}

TEST_CASE("a retry that stop() overtook never runs", "[link]") {
  asio::io_context io;
  Seen seen;
  SchedulerLink link(io, nullptr, kDefaultMaxFrameBytes, record(seen, [] { return StatusOr<Address>(loopback(1)); }));
  link.retry_after(20ms);
  link.stop();
  // Wait past the retry's time: the timer was cancelled, so the loop runs out of work.
  io.restart();
  io.run_for(300ms);
  CHECK(seen.where == 0);
  link.retry_after(1ms);
  run_until(io, [&] { return seen.closed == 1; });
  CHECK(seen.where == 1);
}

TEST_CASE("a retry's pause is spread over its second half, so a fleet does not come back at once", "[link]") {
  CHECK(jittered(2000ms, 0) == 1000ms);
  CHECK(jittered(2000ms, 1000) == 2000ms);
  CHECK(jittered(2000ms, 1001) == 1000ms);
  CHECK(jittered(1ms, 12345) <= 1ms);
  CHECK(jittered(0ms, 7) == 0ms);
  // 4096 workers that lost the scheduler together: their next tries spread over the half-second
  // from 0.5 to 1 s, a few in any millisecond, instead of all 4096 in one.
  std::mt19937_64 rng(42);
  std::map<int64_t, int> per_ms;
  for (int i = 0; i < 4096; ++i) {
    const auto p = jittered(1000ms, rng());
    REQUIRE(p >= 500ms);
    REQUIRE(p <= 1000ms);
    ++per_ms[p.count()];
  }
  CHECK(per_ms.size() > 450);
  int most = 0;
  for (const auto& [ms, n] : per_ms) most = std::max(most, n);
  CHECK(most < 30);
}
