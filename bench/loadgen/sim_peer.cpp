#include "sim_peer.h"

#include <capnp/message.h>

#include "net/framing.h"

namespace psched::loadgen {

namespace asio = boost::asio;

SimPeer::SimPeer(asio::io_context& io, asio::ip::tcp::endpoint scheduler)
    : link_(io, /*tls=*/nullptr, kDefaultMaxFrameBytes,
            {[scheduler]() -> Result<Address> {
               return Address{scheduler.address().to_string(), scheduler.port(), Scheme::kTcp};
             },
             [this](FramedConnection& c) { send_message(c, [&](wire::Message::Builder m) { say_hello(m); }); },
             [this](wire::Message::Reader m) { on_message(m); },
             [this](const Status& why, bool) { on_close(why.message()); }}) {}

void SimPeer::connect() {
  if (!stopped_) link_.connect();
}

void SimPeer::reconnect_after(std::chrono::milliseconds pause) {
  if (!stopped_) link_.retry_after(pause);
}

void SimPeer::leave(const std::string& reason) {
  stopped_ = true;
  link_.stop();
  if (FramedConnection* c = conn()) {
    send_message(*c, [&](wire::Message::Builder m) { m.initGoodbye().setReason(reason); });
    c->close_when_flushed();
  }
}

void SimPeer::drop() {
  stopped_ = true;
  link_.stop();
  if (FramedConnection* c = conn()) c->close("killed");
}

}  // namespace psched::loadgen
