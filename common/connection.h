// FramedConnection: one TCP peer speaking psched frames, on an Asio event loop. It reads frames
// into word-aligned buffers, hands each decoded Message to on_message, and coalesces outgoing frames
// so that all frames queued while a write is in flight go out in one write. A bad frame, a
// Cap'n Proto error or an exception from the handler closes this connection only (after an Error
// where one can be sent). The connection keeps itself alive through its handlers (shared_from_this).
#pragma once

#include <boost/asio.hpp>
#include <capnp/message.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "proto/psched.capnp.h"

namespace psched {

class FramedConnection : public std::enable_shared_from_this<FramedConnection> {
 public:
  struct Handlers {
    std::function<void(wire::Message::Reader)> on_message;
    std::function<void(const std::string& why)> on_close;  // called once
  };

  FramedConnection(boost::asio::ip::tcp::socket socket, uint32_t max_frame_bytes);

  void start(Handlers handlers);
  void send(capnp::MessageBuilder& message);
  // Sends an Error message, then closes once it is written.
  void send_error_and_close(const std::string& message, uint64_t job_id = 0);
  void close(const std::string& why);
  // Closes once everything queued so far is written (used to say Goodbye and leave).
  void close_when_flushed();
  // As close_when_flushed, then runs on_closed (instead of the on_close handler).
  void start_closing(std::function<void()> on_closed);
  // Closes the connection when nothing arrives for idle_ms (0: never). Any frame resets it.
  void set_idle_timeout(std::chrono::milliseconds idle);

  bool is_open() const { return !closed_; }
  const std::string& remote() const { return remote_; }
  size_t queued_bytes() const { return out_.size() + writing_.size(); }

 private:
  void read_header();
  void read_body(uint32_t bytes);
  void dispatch(size_t bytes);
  void flush();
  void arm_idle_timer();

  boost::asio::ip::tcp::socket socket_;
  boost::asio::steady_timer idle_timer_;
  std::chrono::milliseconds idle_{0};
  std::chrono::steady_clock::time_point last_rx_;
  uint32_t max_frame_bytes_;
  Handlers handlers_;
  std::string remote_;
  uint8_t header_[4] = {};
  std::vector<capnp::word> body_;
  std::string out_;      // frames queued while a write is in flight
  std::string writing_;  // the frames of the write in flight
  bool write_in_flight_ = false;
  bool close_after_write_ = false;
  bool closed_ = false;
};

// Builds a one-off message: `fill` gets the root Message builder.
template <typename Fill>
void send_message(FramedConnection& c, Fill&& fill) {
  capnp::MallocMessageBuilder message(256);
  fill(message.initRoot<wire::Message>());
  c.send(message);
}

}  // namespace psched
