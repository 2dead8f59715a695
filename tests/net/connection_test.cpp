// FramedConnection (net/connection.h) over a real loopback socket: frames that arrive together are
// handed to on_message one by one, then on_frames_handled runs once for the burst (psched tops a
// worker up once per report, however many jobs' ResultBatches it carries).
#include <catch2/catch.hpp>

#include <boost/asio.hpp>
#include <capnp/message.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "net/connection.h"
#include "net/framing.h"

using namespace psched;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// `n` heartbeat frames, back to back, as one write would carry them.
std::string frames(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    capnp::MallocMessageBuilder m;
    m.initRoot<wire::Message>().initHeartbeat();
    append_frame(m, out);
  }
  return out;
}

// A FramedConnection on one end of a loopback TCP connection, a plain socket on the other.
struct Loopback {
  asio::io_context io;
  tcp::acceptor acceptor{io, tcp::endpoint(asio::ip::address_v4::loopback(), 0)};
  tcp::socket peer{io};
  std::shared_ptr<FramedConnection> conn;
  Loopback() {
    peer.connect(acceptor.local_endpoint());
    conn = std::make_shared<FramedConnection>(acceptor.accept(), kDefaultMaxFrameBytes);
  }
  // Runs the loop until done() or `limit` has passed.
  template <typename Done>
  void run_until(Done done, std::chrono::seconds limit = 5s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    io.restart();
    while (!done() && std::chrono::steady_clock::now() < deadline) io.run_one_for(20ms);
  }
};

}  // namespace

TEST_CASE("frames that arrive in one burst are each handled, then the burst's hook runs once", "[connection]") {
  Loopback link;
  auto& peer = link.peer;
  auto& conn = link.conn;
  std::string seen;  // 'm' per message, '|' per burst
  conn->start({[&](wire::Message::Reader) { seen += 'm'; }, [&](const std::string&) { seen += 'x'; },
               [&] { seen += '|'; }});
  auto run_until = [&](const std::string& want) { link.run_until([&] { return seen == want; }); };
  asio::write(peer, asio::buffer(frames(3)));
  run_until("mmm|");
  CHECK(seen == "mmm|");
  asio::write(peer, asio::buffer(frames(1)));
  run_until("mmm|m|");
  CHECK(seen == "mmm|m|");
  // A frame and the header of the next: the hook runs for the whole one, the next waits.
  const std::string two = frames(2);
  asio::write(peer, asio::buffer(two.data(), two.size() / 2 + 4));
  run_until("mmm|m|m|");
  CHECK(seen == "mmm|m|m|");
  asio::write(peer, asio::buffer(two.data() + two.size() / 2 + 4, two.size() / 2 - 4));
  run_until("mmm|m|m|m|");
  CHECK(seen == "mmm|m|m|m|");
  conn->close("done");
}

// The owner hears on_close once and nothing after it. A connection told closed while draining (its
// Error going out) is still read, so the peer's writes land, but no frame it reads reaches the
// owner: psched's pre-Hello peers once had a Hello delivered after their on_close, and crashed.
TEST_CASE("once on_close has run, frames still read are dropped, and the peer reads the Error",
          "[connection]") {
  Loopback link;
  auto& peer = link.peer;
  auto& conn = link.conn;
  std::string seen;  // 'm' per message, '|' per burst, 'x' on close
  std::string why;
  auto told = [&] { return seen.find('x') != std::string::npos; };
  const bool from_handler = GENERATE(true, false);
  INFO((from_handler ? "send_error_and_close inside on_message" : "cut_off from outside"));
  conn->start({[&](wire::Message::Reader) {
                 seen += 'm';
                 if (from_handler) conn->send_error_and_close("go away");
               },
               [&](const std::string& w) { seen += 'x'; why = w; }, [&] { seen += '|'; }});
  // Inside the handler: the first frame of a burst of three closes, and the other two are dropped.
  // From outside: one frame heard, then the owner cuts the peer off (on_close later, in the loop).
  asio::write(peer, asio::buffer(frames(from_handler ? 3 : 1)));
  if (!from_handler) {
    link.run_until([&] { return seen == "m|"; });
    conn->cut_off("go away");
  }
  link.run_until(told);
  REQUIRE(told());
  // More frames, then the end of our stream: read in order, so once the connection has closed on
  // that end it has read these first.
  asio::write(peer, asio::buffer(frames(2)));
  peer.shutdown(tcp::socket::shutdown_send);
  link.run_until([&] { return conn->state() == FramedConnection::State::kClosed; });
  CHECK(conn->state() == FramedConnection::State::kClosed);
  CHECK(seen == (from_handler ? "mx" : "m|x"));
  CHECK(why == "go away");
  // The peer reads our Error, then the end of the stream.
  std::string got;
  boost::system::error_code ec;
  char buf[4096];
  while (!ec) got.append(buf, peer.read_some(asio::buffer(buf), ec));
  CHECK(ec == asio::error::eof);
  CHECK(got.find("go away") != std::string::npos);
}

// Frames of many sizes in one long burst (far past the read-ahead, which grows while reads fill it),
// one frame past kMaxReadAheadBytes among them, a frame cut across two writes, then a second burst
// once the socket was drained: every frame arrives whole, once, in order.
TEST_CASE("a long burst of frames of many sizes arrives whole and in order, and so does the next",
          "[connection]") {
  Loopback link;
  auto& peer = link.peer;
  auto& conn = link.conn;
  std::vector<std::string> seen;
  bool closed = false;
  conn->start({[&](wire::Message::Reader m) { seen.emplace_back(m.getError().getMessage().cStr()); },
               [&](const std::string&) { closed = true; }});
  // Frame i carries i and a padding that varies, so frames straddle every buffer boundary.
  auto text = [](int i) {
    const size_t pad = i == 1234 ? FramedConnection::kMaxReadAheadBytes + 4321 : size_t(i * 37 % 211);
    return std::to_string(i) + ":" + std::string(pad, char('a' + i % 26));
  };
  auto burst = [&](int first, int n) {
    std::string out;
    for (int i = first; i < first + n; ++i) {
      capnp::MallocMessageBuilder m;
      m.initRoot<wire::Message>().initError().setMessage(text(i));
      append_frame(m, out);
    }
    return out;
  };
  auto run_until = [&](size_t want) { link.run_until([&] { return seen.size() >= want || closed; }, 10s); };
  const std::string first = burst(0, 3000);  // ~400 KB
  const size_t cut = first.size() / 2 + 3;   // mid-frame
  // Written from another thread while the loop reads: more than the socket buffers may hold unread.
  std::thread writer([&] {
    asio::write(peer, asio::buffer(first.data(), cut));
    asio::write(peer, asio::buffer(first.data() + cut, first.size() - cut));
  });
  run_until(3000);
  writer.join();
  REQUIRE(seen.size() == 3000);
  asio::write(peer, asio::buffer(burst(3000, 40)));
  run_until(3040);
  REQUIRE(seen.size() == 3040);
  CHECK_FALSE(closed);
  for (int i = 0; i < 3040; ++i) {
    INFO("frame " << i);
    CHECK(seen[size_t(i)] == text(i));
  }
  conn->close("done");
}
