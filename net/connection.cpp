// FramedConnection: frames over a plain or TLS stream, read in place when the socket is ready, and
// the connection's life (start, idle timeout, states, close); its sending side (queueing, writing,
// unsent limits, cutting off a peer that does not read) is net/connection_send.cpp, its TLS side
// (first byte, handshake, refusals, why a read failed) net/connection_tls.cpp.
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
  if (handled && is_open() && !told_closed_ && handlers_.on_frames_handled) handlers_.on_frames_handled();
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
  deliver(n);
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

void FramedConnection::deliver(size_t bytes) {
  if (told_closed_) return;  // read only to drain: its owner has let it go
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
  told_closed_ = true;
  if (handlers_.on_close) {
    auto on_close = std::move(handlers_.on_close);
    handlers_.on_close = nullptr;
    on_close(why);
  }
  // Drop the handlers (and the owners they capture) later: close() may run inside on_message.
  asio::post(socket().get_executor(), [self = shared_from_this()] { self->handlers_ = Handlers{}; });
}

}  // namespace psched
