// FramedConnection: frames over a plain or TLS stream, read and written in place when the socket
// is ready; its TLS side (first byte, handshake, refusals, why a read failed) is net/connection_tls.cpp.
#include "net/connection.h"

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "core/check.h"
#include "net/framing.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::variant<tcp::socket, asio::ssl::stream<tcp::socket>> make_stream(tcp::socket socket,
                                                                       const Transport& transport) {
  if (!transport.tls) return std::variant<tcp::socket, asio::ssl::stream<tcp::socket>>(std::move(socket));
  return std::variant<tcp::socket, asio::ssl::stream<tcp::socket>>(std::in_place_index<1>, std::move(socket),
                                                                   *transport.tls);
}

}  // namespace

FramedConnection::FramedConnection(tcp::socket socket, uint32_t max_frame_bytes, Transport transport)
    : stream_(make_stream(std::move(socket), transport)),
      role_(transport.role),
      idle_timer_(this->socket().get_executor()),
      max_frame_bytes_(max_frame_bytes) {
  boost::system::error_code ec;
  this->socket().set_option(tcp::no_delay(true), ec);
  // The plain stream reads and writes in place when the socket is ready (read_more, flush): a call
  // that would block must say so, not wait.
  this->socket().non_blocking(true, ec);
  const auto ep = this->socket().remote_endpoint(ec);
  remote_ = ec ? std::string("?") : fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

FramedConnection::~FramedConnection() {
  if (unsent_total_) unsent_total_->bytes -= counted_bytes_;
}

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

tcp::socket& FramedConnection::socket() {
  if (auto* tls = std::get_if<TlsStream>(&stream_)) return tls->next_layer();
  return std::get<tcp::socket>(stream_);
}

void FramedConnection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  last_rx_ = std::chrono::steady_clock::now();
  if (!std::holds_alternative<TlsStream>(stream_)) return read_next();
  // Nothing may be written through TLS before the handshake is done: frames queued meanwhile wait
  // as they would behind a write in flight, and go out once it completes.
  channel_ = Channel::kHandshaking;  // the TLS channel's first state (start runs once)
  if (role_ == TlsRole::kServer) await_first_byte();
  else handshake();
}

void FramedConnection::set_idle_timeout(std::chrono::milliseconds idle,
                                        std::shared_ptr<const LoopWatchdog> watchdog) {
  idle_ = idle;
  watchdog_ = std::move(watchdog);
  last_rx_ = std::chrono::steady_clock::now();
  arm_idle_timer(last_rx_);
}

void FramedConnection::arm_idle_timer(std::chrono::steady_clock::time_point silent_since) {
  if (!is_open() || idle_.count() <= 0) return;
  idle_timer_.expires_at(silent_since + idle_);
  idle_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || !self->is_open()) return;
    const auto now = std::chrono::steady_clock::now();
    const auto since = self->watchdog_ ? self->watchdog_->silent_since(self->last_rx_, now)
                                       : self->last_rx_;
    if (now - since >= self->idle_) {
      self->close(fmt::format("nothing received for {} ms{}", self->idle_.count(),
                              self->read_paused_ ? " (and it does not read what we send)" : ""));
    } else {
      self->arm_idle_timer(since);
    }
  });
}

// What is read comes in as many bytes as the socket has (up to the buffer's room) and is cut into
// frames here: a burst of frames costs one read, not two per frame (a header, then its body).
void FramedConnection::read_next() {
  Taken taken = Taken::kFrame;
  bool handled = false;
  while (is_open() && taken == Taken::kFrame) {
    if (queued_bytes() > kPauseReadingBytes) {
      read_paused_ = true;  // flush() resumes once the peer has taken what we owe it
      break;
    }
    taken = take_frame();
    handled = handled || taken == Taken::kFrame;
  }
  if (handled && is_open() && handlers_.on_frames_handled) handlers_.on_frames_handled();
  if (taken == Taken::kNeedMore && is_open()) read_more();
}

FramedConnection::Taken FramedConnection::take_frame() {
  const size_t have = in_end_ - in_begin_;
  if (have < kFrameHeaderBytes) return Taken::kNeedMore;
  const uint8_t* header = reinterpret_cast<const uint8_t*>(in_.get() + in_begin_);
  if (header[0] == kTlsHandshakeRecord && header[1] == 3 && !std::holds_alternative<TlsStream>(stream_) &&
      can_write() && state_ == State::kOpen) {
    // A ClientHello on a plain port: told in the clear (its TLS stack will fail on our frame), the
    // rest of its hello discarded before we close.
    refuse_in_the_clear(kSchedulerSpeaksPlain, kSchedulerSpeaksPlain);
    return Taken::kStop;
  }
  const uint32_t n = decode_frame_length(header);
  if (n == 0 || n % sizeof(capnp::word) != 0) {
    send_error_and_close(fmt::format("malformed frame: length {} is not a positive multiple of 8", n));
    return Taken::kStop;
  }
  if (n > max_frame_bytes_) {
    send_error_and_close(fmt::format("frame of {} bytes exceeds the limit of {} bytes", n, max_frame_bytes_));
    return Taken::kStop;
  }
  if (have < kFrameHeaderBytes + n) {
    need_ = kFrameHeaderBytes + n;
    return Taken::kNeedMore;
  }
  // Cap'n Proto reads whole words: the body is copied to word-aligned memory (a frame's offset in
  // the read buffer is any multiple of 4).
  if (n / sizeof(capnp::word) > body_words_) {
    body_words_ = n / sizeof(capnp::word);
    body_.reset(new capnp::word[body_words_]);  // default-initialised: no page touched yet
  }
  std::memcpy(body_.get(), in_.get() + in_begin_ + kFrameHeaderBytes, n);
  in_begin_ += kFrameHeaderBytes + n;
  need_ = 0;
  last_rx_ = std::chrono::steady_clock::now();  // a whole frame, not a byte, is a sign of life
  dispatch(n);
  if (body_words_ * sizeof(capnp::word) > kKeepBodyBytes) {
    body_.reset();
    body_words_ = 0;
  }
  return is_open() ? Taken::kFrame : Taken::kStop;
}

void FramedConnection::read_more() {
  // What is left of a frame moves to the front; the buffer holds the frame being read (need_,
  // once its header is in) and the read-ahead at least: kReadAheadBytes, doubled after each read
  // that filled it (up to kMaxReadAheadBytes). It is let go when empty and either larger than
  // kKeepBodyBytes (a big frame's) or grown for a burst that has ended (the last read drained the
  // socket).
  const size_t left = in_end_ - in_begin_;
  if (left == 0 && (in_capacity_ > kKeepBodyBytes || (drained_ && in_capacity_ > kReadAheadBytes))) {
    in_.reset();
    in_capacity_ = 0;
  }
  if (in_begin_ > 0 && left > 0) std::memmove(in_.get(), in_.get() + in_begin_, left);
  in_begin_ = 0;
  in_end_ = left;
  const size_t read_ahead =
      drained_ ? kReadAheadBytes : std::clamp(2 * in_capacity_, kReadAheadBytes, kMaxReadAheadBytes);
  const size_t want = std::max(read_ahead, need_);
  if (in_capacity_ < want) {
    std::unique_ptr<char[]> bigger(new char[want]);  // default-initialised: no page touched yet
    if (left > 0) std::memcpy(bigger.get(), in_.get(), left);
    in_ = std::move(bigger);
    in_capacity_ = want;
  }
  // A plain socket that the last read drained waits until it is readable, then is read in place:
  // an asynchronous read would first try the socket at once and find it empty (a second recv per
  // message: 1024 workers' reports cost psched 2048 recv calls a job).
  auto* plain = std::get_if<tcp::socket>(&stream_);
  if (plain && drained_) {
    plain->async_wait(tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
      if (!self->is_open()) return;
      if (ec) return self->took(ec, 0);
      boost::system::error_code read_ec;
      const size_t n = std::get<tcp::socket>(self->stream_).read_some(
          asio::buffer(self->in_.get() + self->in_end_, self->in_capacity_ - self->in_end_), read_ec);
      if (read_ec == asio::error::would_block) return self->read_more();
      self->took(read_ec, n);
    });
    return;
  }
  with_stream([this](auto& stream) {
    stream.async_read_some(asio::buffer(in_.get() + in_end_, in_capacity_ - in_end_),
                           [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                             if (self->is_open()) self->took(ec, n);
                           });
  });
}

void FramedConnection::took(const boost::system::error_code& ec, size_t n) {
  if (ec) {
    close(why_failed(ec, in_end_ > in_begin_ ? "peer closed the connection mid-frame" : "peer closed the connection"));
    return;
  }
  drained_ = n < in_capacity_ - in_end_;
  in_end_ += n;
  read_next();
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

void FramedConnection::move(Channel to) {
  const bool legal = (channel_ == Channel::kHandshaking && (to == Channel::kIdle || to == Channel::kRefusing)) ||
                     (channel_ == Channel::kIdle && (to == Channel::kWriting || to == Channel::kRefusing)) ||
                     (channel_ == Channel::kWriting && to == Channel::kIdle);
  PSCHED_ASSERT(legal, int(channel_), int(to));
  channel_ = to;
}

void FramedConnection::close(const std::string& why) {
  if (state_ == State::kClosed) return;
  transition(State::kClosed);
  boost::system::error_code ec;
  idle_timer_.cancel();
  socket().shutdown(tcp::socket::shutdown_both, ec);
  socket().close(ec);
  std::string().swap(out_);  // never to be written (writing_ waits for its write's completion)
  account();
  if (handlers_.on_close) {
    auto on_close = std::move(handlers_.on_close);
    handlers_.on_close = nullptr;
    on_close(why);
  }
  // Drop the handlers (and the owners they capture) later: close() may run inside on_message.
  asio::post(socket().get_executor(), [self = shared_from_this()] { self->handlers_ = Handlers{}; });
}

}  // namespace psched
