#include "sim_peer.h"

#include <capnp/dynamic.h>
#include <capnp/message.h>

#include <cstdio>
#include <cstdlib>

#include "app/exit_codes.h"
#include "net/framing.h"

namespace psched::loadgen {

namespace asio = boost::asio;

SimPeer::SimPeer(asio::io_context& io, asio::ip::tcp::endpoint scheduler)
    : link_(io, /*tls=*/nullptr, kDefaultMaxFrameBytes,
            {[scheduler]() -> StatusOr<Address> {
               return Address{scheduler.address().to_string(), scheduler.port(), Scheme::kTcp};
             },
             [this](FramedConnection& c) { send_message(c, [&](wire::Message::Builder m) { say_hello(m); }); },
             [this](wire::Message::Reader m) { on_message(m); },
             [this](const Status& why, bool) { on_close(why.message()); }}) {}

void SimPeer::unknown_message(const std::string& peer, wire::Message::Reader message) {
  std::string name = "field " + std::to_string(unsigned(message.which()));  // past this build's schema
  KJ_IF_MAYBE(field, capnp::toDynamic(message).which()) { name = field->getProto().getName().cStr(); }
  std::fprintf(stderr,
               "psched-loadgen: %s got a message it has no case for (%s): the simulator no longer speaks "
               "psched's protocol; teach bench/loadgen that message\n",
               peer.c_str(), name.c_str());
  std::fflush(stderr);
  std::_Exit(kExitFailure);  // now: the other loops' threads must not go on measuring
}

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
