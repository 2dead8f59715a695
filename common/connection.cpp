#include "common/connection.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/check.h"
#include "common/framing.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

FramedConnection::FramedConnection(tcp::socket socket, uint32_t max_frame_bytes)
    : socket_(std::move(socket)),
      idle_timer_(socket_.get_executor()),
      max_frame_bytes_(max_frame_bytes) {
  boost::system::error_code ec;
  socket_.set_option(tcp::no_delay(true), ec);
  const auto ep = socket_.remote_endpoint(ec);
  remote_ = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

void FramedConnection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  last_rx_ = std::chrono::steady_clock::now();
  read_header();
}

void FramedConnection::set_idle_timeout(std::chrono::milliseconds idle) {
  idle_ = idle;
  last_rx_ = std::chrono::steady_clock::now();
  arm_idle_timer();
}

void FramedConnection::arm_idle_timer() {
  if (!is_open() || idle_.count() <= 0) return;
  idle_timer_.expires_at(last_rx_ + idle_);
  idle_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || !self->is_open()) return;
    if (std::chrono::steady_clock::now() - self->last_rx_ >= self->idle_) {
      self->close(fmt::format("nothing received for {} ms{}", self->idle_.count(),
                              self->read_paused_ ? " (and it does not read what we send)" : ""));
    } else {
      self->arm_idle_timer();
    }
  });
}

void FramedConnection::read_header() {
  asio::async_read(socket_, asio::buffer(header_, sizeof(header_)),
                   [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                     if (!self->is_open()) return;
                     if (ec) {
                       self->close(ec == asio::error::eof ? "peer closed the connection"
                                                          : ec.message());
                       return;
                     }
                     const uint32_t n = decode_frame_length(self->header_);
                     if (n == 0 || n % sizeof(capnp::word) != 0) {
                       self->send_error_and_close(
                           fmt::format("malformed frame: length {} is not a positive multiple of 8", n));
                       return;
                     }
                     if (n > self->max_frame_bytes_) {
                       self->send_error_and_close(fmt::format(
                           "frame of {} bytes exceeds the limit of {} bytes", n, self->max_frame_bytes_));
                       return;
                     }
                     self->read_body(n);
                   });
}

void FramedConnection::read_body(uint32_t bytes) {
  if (bytes / sizeof(capnp::word) > body_words_) {
    body_words_ = bytes / sizeof(capnp::word);
    body_.reset(new capnp::word[body_words_]);  // default-initialised: no page touched yet
  }
  asio::async_read(socket_, asio::buffer(body_.get(), bytes),
                   [self = shared_from_this(), bytes](const boost::system::error_code& ec, size_t) {
                     if (!self->is_open()) return;
                     if (ec) {
                       self->close(ec == asio::error::eof ? "peer closed the connection mid-frame"
                                                          : ec.message());
                       return;
                     }
                     self->last_rx_ = std::chrono::steady_clock::now();
                     self->dispatch(bytes);
                     if (self->body_words_ * sizeof(capnp::word) > kKeepBodyBytes) {
                       self->body_.reset();
                       self->body_words_ = 0;
                     }
                     if (self->is_open()) self->read_next();
                   });
}

void FramedConnection::read_next() {
  if (queued_bytes() > kPauseReadingBytes) {
    read_paused_ = true;  // flush() resumes once the peer has taken what we owe it
    return;
  }
  read_header();
}

void FramedConnection::dispatch(size_t bytes) {
  std::string failure;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(body_.get(), bytes / sizeof(capnp::word)),
        reader_options_for(bytes));
    handlers_.on_message(reader.getRoot<wire::Message>());
  } catch (const kj::Exception& e) {
    failure = fmt::format("malformed message: {}", e.getDescription().cStr());
  } catch (const std::exception& e) {
    failure = fmt::format("cannot handle message: {}", e.what());
  }
  if (!failure.empty() && is_open()) send_error_and_close(failure);
}

void FramedConnection::send(capnp::MessageBuilder& message) {
  if (state_ != State::kOpen) return;
  const size_t limit = std::max(kMaxUnsentBytes, size_t{2} * max_frame_bytes_);
  if (queued_bytes() > limit) {
    // Closed later, not here: send() runs inside loops over the owner's peers.
    transition(State::kDraining);
    asio::post(socket_.get_executor(), [self = shared_from_this(), n = queued_bytes()] {
      self->close(fmt::format("peer is not reading ({} bytes unsent)", n));
    });
    return;
  }
  append_frame(message, out_);
  if (!write_in_flight_) flush();
}

void FramedConnection::flush() {
  if (!is_open() || out_.empty()) return;
  writing_.clear();
  writing_.swap(out_);
  write_in_flight_ = true;
  asio::async_write(socket_, asio::buffer(writing_),
                    [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                      self->write_in_flight_ = false;
                      if (!self->is_open()) return;
                      if (ec) {
                        self->close(ec.message());
                        return;
                      }
                      self->writing_.clear();
                      if (self->read_paused_ && self->state_ == State::kOpen &&
                          self->queued_bytes() <= kPauseReadingBytes) {
                        self->read_paused_ = false;
                        self->read_header();
                      }
                      if (!self->out_.empty()) {
                        self->flush();
                      } else if (self->state_ == State::kDraining) {
                        self->close("closed by us");
                      }
                    });
}

void FramedConnection::send_error_and_close(const std::string& message, uint64_t job_id) {
  if (state_ != State::kOpen) return;
  spdlog::debug("{}: sending error and closing: {}", remote_, message);
  capnp::MallocMessageBuilder m(128);
  auto err = m.initRoot<wire::Message>().initError();
  err.setMessage(message);
  err.setJobId(job_id);
  append_frame(m, out_);
  transition(State::kDraining);
  if (handlers_.on_close) {
    auto on_close = std::move(handlers_.on_close);
    handlers_.on_close = nullptr;
    on_close(message);
  }
  if (!write_in_flight_) flush();
  // A peer that never reads must not hold the socket: give the error a moment, then close.
  idle_ = std::chrono::milliseconds(2000);
  last_rx_ = std::chrono::steady_clock::now();
  arm_idle_timer();
}

void FramedConnection::close_when_flushed() {
  if (state_ == State::kClosed) return;
  if (state_ == State::kOpen) transition(State::kDraining);
  if (!write_in_flight_ && out_.empty()) {
    close("closed by us");
    return;
  }
  if (!write_in_flight_) flush();
}

void FramedConnection::start_closing(std::function<void()> on_closed) {
  handlers_.on_close = [on_closed = std::move(on_closed)](const std::string&) { on_closed(); };
  if (state_ == State::kClosed) {
    auto f = std::move(handlers_.on_close);
    f("");
    return;
  }
  close_when_flushed();
}

// The one place the connection's life changes. It only moves forward: open -> draining -> closed,
// or open -> closed.
void FramedConnection::transition(State to) {
  PSCHED_ASSERT(to > state_, int(state_), int(to));
  state_ = to;
}

void FramedConnection::close(const std::string& why) {
  if (state_ == State::kClosed) return;
  transition(State::kClosed);
  boost::system::error_code ec;
  idle_timer_.cancel();
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  if (handlers_.on_close) {
    auto on_close = std::move(handlers_.on_close);
    handlers_.on_close = nullptr;
    on_close(why);
  }
  // Drop the handlers (and the owners they capture) later: close() may run inside on_message.
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->handlers_ = Handlers{}; });
}

}  // namespace psched
