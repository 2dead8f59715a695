// FramedConnection (net/connection.h) over a real loopback socket: frames that arrive together are
// handed to on_message one by one, then on_frames_handled runs once for the burst (psched tops a
// worker up once per report, however many jobs' ResultBatches it carries).
#include <catch2/catch.hpp>

#include <boost/asio.hpp>
#include <capnp/message.h>

#include <chrono>
#include <memory>
#include <string>

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

}  // namespace

TEST_CASE("frames that arrive in one burst are each handled, then the burst's hook runs once", "[connection]") {
  asio::io_context io;
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
  tcp::socket peer(io);
  peer.connect(acceptor.local_endpoint());
  auto conn = std::make_shared<FramedConnection>(acceptor.accept(), kDefaultMaxFrameBytes);
  std::string seen;  // 'm' per message, '|' per burst
  conn->start({[&](wire::Message::Reader) { seen += 'm'; }, [&](const std::string&) { seen += 'x'; },
               [&] { seen += '|'; }});
  auto run_until = [&](const std::string& want) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    io.restart();
    while (seen != want && std::chrono::steady_clock::now() < deadline) io.run_one_for(20ms);
  };
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
