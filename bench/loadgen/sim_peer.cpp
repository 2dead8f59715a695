#include "sim_peer.h"

#include <capnp/message.h>
#include <fmt/format.h>

#include "net/framing.h"

namespace psched::loadgen {

namespace asio = boost::asio;

SimPeer::SimPeer(asio::io_context& io, asio::ip::tcp::endpoint scheduler)
    : io_(io), scheduler_(std::move(scheduler)), retry_timer_(io) {}

void SimPeer::connect() {
  if (stopped_) return;
  auto socket = std::make_shared<asio::ip::tcp::socket>(io_);
  const uint32_t generation = ++generation_;
  std::weak_ptr<SimPeer> weak = shared_from_this();
  socket->async_connect(scheduler_, [weak, socket, generation](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (!self || self->stopped_ || self->generation_ != generation) return;
    if (ec) {
      self->on_close(fmt::format("connect: {}", ec.message()));
      return;
    }
    boost::system::error_code ignored;
    socket->set_option(asio::ip::tcp::no_delay(true), ignored);
    self->conn_ = std::make_shared<FramedConnection>(std::move(*socket), kDefaultMaxFrameBytes);
    self->conn_->start({[weak, generation](wire::Message::Reader m) {
                          if (auto s = weak.lock(); s && s->generation_ == generation) s->on_message(m);
                        },
                        [weak, generation](const std::string& why) {
                          auto s = weak.lock();
                          if (!s || s->generation_ != generation) return;
                          s->conn_.reset();
                          s->on_close(why);
                        }});
    send_message(*self->conn_, [&](wire::Message::Builder m) { self->say_hello(m); });
  });
}

void SimPeer::reconnect_after(std::chrono::milliseconds pause) {
  if (stopped_) return;
  retry_timer_.expires_after(pause);
  std::weak_ptr<SimPeer> weak = shared_from_this();
  retry_timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (auto s = weak.lock(); s && !ec) s->connect();
  });
}

void SimPeer::leave(const std::string& reason) {
  stopped_ = true;
  ++generation_;
  retry_timer_.cancel();
  if (conn_ && conn_->is_open()) {
    send_message(*conn_, [&](wire::Message::Builder m) { m.initGoodbye().setReason(reason); });
    conn_->close_when_flushed();
  }
  conn_.reset();
}

void SimPeer::drop() {
  stopped_ = true;
  ++generation_;
  retry_timer_.cancel();
  if (conn_) conn_->close("killed");
  conn_.reset();
}

}  // namespace psched::loadgen
