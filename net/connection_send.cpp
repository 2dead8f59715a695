// FramedConnection's sending side: frames queued and written in place while the socket takes them
// (a burst of sends goes out in one write at the end of the loop's turn), what is held unsent and
// its limits (the peer's own, and the group's UnsentTotal), a peer that does not read cut off, and
// an Error told before the close. The reading side and the connection's life are in
// net/connection.cpp, its TLS side in net/connection_tls.cpp.
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <string>

#include "core/check.h"
#include "net/connection.h"
#include "net/framing.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

void FramedConnection::count_unsent_into(std::shared_ptr<UnsentTotal> total) {
  if (unsent_total_) unsent_total_->bytes -= counted_bytes_;
  counted_bytes_ = 0;
  unsent_total_ = std::move(total);
  account();
}

void FramedConnection::account() {
  if (!unsent_total_) return;
  const size_t now = held_bytes();
  const bool grew = now > counted_bytes_;
  unsent_total_->bytes = unsent_total_->bytes - counted_bytes_ + now;
  counted_bytes_ = now;
  UnsentTotal& total = *unsent_total_;
  if (!grew || total.bytes <= total.limit || !total.on_over || total.in_on_over) return;
  const auto keep = unsent_total_;  // on_over may cut this connection off
  total.in_on_over = true;
  total.on_over();
  total.in_on_over = false;
}

void FramedConnection::release_written() {
  writing_.clear();
  if (writing_.capacity() > kKeepBodyBytes) std::string().swap(writing_);
  account();
}

void FramedConnection::send(capnp::MessageBuilder& message) {
  if (state_ != State::kOpen) return;
  const size_t limit =
      max_unsent_bytes_ > 0 ? max_unsent_bytes_ : std::max(kMaxUnsentBytes, size_t{2} * max_frame_bytes_);
  if (queued_bytes() > limit) {
    cut_off(fmt::format("peer is not reading: {} bytes unsent, over the limit of {}", queued_bytes(), limit));
    return;
  }
  append_frame(message, out_);
  account();
  // Written at the end of this turn of the loop, not now: the messages a handler sends to one peer
  // (a DefineJob and its TaskBatch, a Progress and its JobResult, a worker's result batches) go out
  // in one write, so the kernel's per-write cost (most of a message's cost on loopback) is paid once.
  if (!can_write() || flush_posted_) return;
  flush_posted_ = true;
  asio::post(socket().get_executor(), [self = shared_from_this()] {
    self->flush_posted_ = false;
    if (self->can_write()) self->flush();
  });
}

void FramedConnection::flush() {
  if (!is_open() || out_.empty()) return;
  writing_.clear();
  writing_.swap(out_);
  written_ = 0;
  move(Channel::kWriting);
  if (std::holds_alternative<tcp::socket>(stream_)) return write_plain(/*in_flush=*/true);
  with_stream([this](auto& stream) {
    asio::async_write(stream, asio::buffer(writing_),
                      [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                        if (!self->is_open()) return self->release_written();
                        self->wrote(ec);
                      });
  });
}

// A plain socket is written in place: most writes fit the socket's buffer, and then no write
// operation and no completion handler is needed. What does not fit waits until the socket takes
// more, and written_ always says how much of writing_ is out (cut_off keeps only the frame begun).
// Inside flush() (a send, a close_when_flushed: the owner may be in a loop over its peers) only a
// write that leaves nothing to do ends here; one that must close, resume reading or report an
// error ends at the end of the turn, so no handler runs inside the owner's call.
void FramedConnection::write_plain(bool in_flush) {
  auto& plain = std::get<tcp::socket>(stream_);
  boost::system::error_code ec;
  while (written_ < writing_.size() && !ec)
    written_ += plain.write_some(asio::buffer(writing_.data() + written_, writing_.size() - written_), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    plain.async_wait(tcp::socket::wait_write, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (!self->is_open()) return self->release_written();
      if (ec) return self->wrote(ec);
      self->write_plain(/*in_flush=*/false);
    });
    return;
  }
  if (in_flush && (ec || state_ != State::kOpen || read_paused_)) {
    asio::post(socket().get_executor(), [self = shared_from_this(), ec] {
      if (!self->is_open()) return self->release_written();
      self->wrote(ec);
    });
    return;
  }
  wrote(ec);
}

void FramedConnection::wrote(const boost::system::error_code& ec) {
  move(Channel::kIdle);
  if (ec) {
    close(why_failed(ec, "peer closed the connection"));
    return;
  }
  release_written();
  if (read_paused_ && state_ == State::kOpen && queued_bytes() <= kPauseReadingBytes) {
    read_paused_ = false;
    read_next();
  }
  if (!is_open()) return;
  if (!out_.empty()) {
    flush();
  } else if (state_ == State::kDraining) {
    drained();
  }
}

// Everything queued is written and nothing more will be. After an Error (a refusal, a cut-off) our
// side is shut down, so the peer reads the Error, then the end of the stream, and the linger timer
// (tell_and_close) closes the socket: closing at once, with what the peer sent still unread, would
// reset the connection and the Error waiting in the kernel for a peer that reads late with it.
// Through TLS (no close_notify said here) and after a Goodbye, it closes now.
void FramedConnection::drained() {
  if (!sent_error_ || !std::holds_alternative<tcp::socket>(stream_)) {
    close(cut_off_why_.empty() ? "closed by us" : cut_off_why_);
    return;
  }
  boost::system::error_code ignored;
  socket().shutdown(tcp::socket::shutdown_send, ignored);
}

// Of a write in flight, only what keeps the peer's stream whole is kept: the rest of the frame it
// is in the middle of (none if it stopped between frames). What was written stays the peer's.
void FramedConnection::keep_only_frame_begun() {
  size_t end = 0;
  while (end < written_)
    end += kFrameHeaderBytes + decode_frame_length(reinterpret_cast<const uint8_t*>(writing_.data() + end));
  PSCHED_ASSERT(end <= writing_.size(), end, writing_.size());
  std::string rest(writing_, written_, end - written_);
  writing_.swap(rest);
  written_ = 0;
}

void FramedConnection::send_error_and_close(const std::string& message, uint64_t job_id) {
  if (state_ != State::kOpen) return;
  transition(State::kDraining);
  tell_and_close(message, job_id);
}

void FramedConnection::cut_off(const std::string& why) {
  if (!is_open() || !cut_off_why_.empty()) return;
  cut_off_why_ = why;
  std::string().swap(out_);  // whole frames, none of them begun
  const bool plain = std::holds_alternative<tcp::socket>(stream_);
  if (plain && channel_ == Channel::kWriting) keep_only_frame_begun();
  if (state_ == State::kOpen) transition(State::kDraining);
  account();
  // The handlers later, not here: this runs inside send(), inside the owner's loops over its peers.
  // A plain socket's Error goes after the frame begun; a TLS write in flight cannot be cut short.
  asio::post(socket().get_executor(), [self = shared_from_this(), plain] {
    if (!self->is_open()) return;
    if (self->can_write() || plain) {
      self->tell_and_close(self->cut_off_why_, 0);
    } else {
      self->close(self->cut_off_why_);
    }
  });
}

void FramedConnection::tell_and_close(const std::string& message, uint64_t job_id) {
  spdlog::debug("{}: sending error and closing: {}", remote_, message);
  sent_error_ = true;
  OutgoingMessage m(128);
  auto err = m.initRoot<wire::Message>().initError();
  err.setMessage(message);
  err.setJobId(job_id);
  append_frame(m, out_);
  account();
  told_closed_ = true;  // from here on what the peer sends is read and dropped
  if (handlers_.on_close) {
    auto on_close = std::move(handlers_.on_close);
    handlers_.on_close = nullptr;
    on_close(message);
  }
  if (can_write()) flush();
  // A peer that never reads must not hold the socket: give the error a moment, then close.
  idle_ = std::chrono::milliseconds(2000);
  watchdog_.reset();
  last_rx_ = std::chrono::steady_clock::now();
  arm_idle_timer(last_rx_);
}

void FramedConnection::close_when_flushed() {
  if (state_ == State::kClosed) return;
  if (state_ == State::kOpen) transition(State::kDraining);
  if (can_write() && out_.empty()) {
    close("closed by us");
    return;
  }
  if (can_write()) flush();
}

}  // namespace psched
