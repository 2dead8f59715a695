// FramedConnection: one TCP peer speaking psched frames, on an Asio event loop, in the clear or
// through TLS (a Transport with a context: the handshake comes first; the framing below is the same
// code for both, written against either stream). It reads frames
// into word-aligned buffers, hands each decoded Message to on_message, and coalesces outgoing frames
// so that all frames queued while a write is in flight go out in one write. A bad frame, a
// Cap'n Proto error or an exception from the handler closes this connection only (after an Error
// where one can be sent). A peer that does not read what we send stops being read from (past
// kPauseReadingBytes unsent) and is cut off past its limit (max(kMaxUnsentBytes, 2 frames) unless
// its owner sets one): neither its requests nor what we push to it (a client's streamed partials)
// can make us queue without bound. A group of connections may count what they hold into one
// UnsentTotal, whose owner is told when the group passes its limit (psched's clients together). A frame's buffer is allocated uninitialised (memory is
// touched only as bytes arrive) and buffers past kKeepBodyBytes are freed after use, so a peer
// that announces a large frame and dribbles it costs what it sends. The connection keeps itself
// alive through its handlers (shared_from_this). Its life is a State that only moves forward,
// changed in transition() alone: open, then draining (nothing more is queued; it closes once what
// is queued is written), then closed.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <capnp/message.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "net/framing.h"
#include "net/loop_watchdog.h"
#include "net/tls.h"
#include "proto/psched.capnp.h"

namespace psched {

// How a connection's bytes travel: plain TCP (no context) or TLS with `context` as `role`. A TLS
// server tells a plain-TCP peer, in a plain Error frame, that it speaks TLS; any server tells a
// TLS peer in the same way that it does not.
struct Transport {
  std::shared_ptr<boost::asio::ssl::context> tls;
  TlsRole role = TlsRole::kServer;
};

// What a group of connections holds unsent together: each member adds what its send buffers hold
// (their capacity, so a buffer grown for a burst counts until it is released). Each time a member
// grows the group past `limit`, the owner's on_over runs at once, inside that member's send(), and
// cuts off whom it chooses (cut_off, which calls no handler then: it may run inside the owner's
// loops over its peers), so the group never holds more than the limit and one frame. One event
// loop: no locks.
struct UnsentTotal {
  size_t bytes = 0;
  size_t limit = SIZE_MAX;
  std::function<void()> on_over;
  bool in_on_over = false;  // on_over is running (what it cuts off only shrinks the total)
};

class FramedConnection : public std::enable_shared_from_this<FramedConnection> {
 public:
  struct Handlers {
    std::function<void(wire::Message::Reader)> on_message;
    // Called once. No frame reaches on_message or on_frames_handled after it: a connection told
    // closed while draining (send_error_and_close, cut_off) is still read, to let the peer's
    // writes land while our Error goes out, but what it reads is dropped.
    std::function<void(const std::string& why)> on_close;
    // Optional: after the frames one read brought were handed to on_message, so the owner can do
    // once for a burst what it deferred (psched tops a worker up once per report, not per job).
    std::function<void()> on_frames_handled = nullptr;
  };

  static constexpr size_t kPauseReadingBytes = size_t{1} << 20;
  static constexpr size_t kMaxUnsentBytes = size_t{64} << 20;
  static constexpr size_t kKeepBodyBytes = size_t{64} << 10;
  // A read asks for at least this much (a burst of small frames in one read); an idle peer's
  // buffer is this big (psched holds one per connection). A read that fills the buffer asks for
  // twice as much next time, up to kMaxReadAheadBytes, so a long burst (a client's hundred Submits)
  // costs few reads; once a read empties the socket with no frame left over, the buffer is back to
  // kReadAheadBytes.
  static constexpr size_t kReadAheadBytes = 2048;
  static constexpr size_t kMaxReadAheadBytes = size_t{64} << 10;

  FramedConnection(boost::asio::ip::tcp::socket socket, uint32_t max_frame_bytes,
                   Transport transport = {});
  ~FramedConnection();

  void start(Handlers handlers);
  void send(capnp::MessageBuilder& message);
  // Sends an Error message, then closes once it is written.
  void send_error_and_close(const std::string& message, uint64_t job_id = 0);
  void close(const std::string& why);
  // Closes once everything queued so far is written (used to say Goodbye and leave).
  void close_when_flushed();
  // As close_when_flushed, then runs on_closed (instead of the on_close handler).
  void start_closing(std::function<void()> on_closed);
  // Closes the connection when nothing arrives for idle_ms (0: never). Any frame resets it. With
  // a watchdog of this connection's loop, silence counts only from the loop's last stall, so a
  // daemon that was itself stopped reads what arrived before it judges the peer (loop_watchdog.h).
  void set_idle_timeout(std::chrono::milliseconds idle,
                        std::shared_ptr<const LoopWatchdog> watchdog = nullptr);
  // Frames longer than this are refused from now on (the scheduler allows small ones before Hello).
  void set_max_frame_bytes(uint32_t max_frame_bytes) { max_frame_bytes_ = max_frame_bytes; }
  // The most this connection queues unsent before it cuts the peer off (0: the default,
  // max(kMaxUnsentBytes, 2 frames)). A frame is always queued while less than this is.
  void set_max_unsent_bytes(size_t bytes) { max_unsent_bytes_ = bytes; }
  // From now on what this connection holds unsent counts into `total` (until it is destroyed).
  void count_unsent_into(std::shared_ptr<UnsentTotal> total);
  // Cuts off a peer that does not read what it is sent: the frames not yet written are dropped,
  // and so is a plain write in flight but for the rest of the frame begun (at most one frame kept),
  // and nothing more is queued, at once; then, at the end of the loop's turn, the peer is told `why`
  // in an Error after that frame, our side is shut down once it is written, and the socket closes
  // after a short linger (tell_and_close): a peer that reads again within it learns why. Through TLS
  // with a write in flight (which cannot be cut short) it is closed at once. on_close hears `why`
  // either way, never from inside this call.
  void cut_off(const std::string& why);

  enum class State : uint8_t { kOpen, kDraining, kClosed };

  State state() const { return state_; }
  bool is_open() const { return state_ != State::kClosed; }
  const std::string& remote() const { return remote_; }
  size_t queued_bytes() const { return out_.size() + writing_.size(); }
  // What the send buffers hold in memory: queued_bytes() and the room they grew to.
  size_t held_bytes() const { return out_.capacity() + writing_.capacity(); }
  // True once TLS itself refused the peer (a certificate, a protocol mismatch): the same settings
  // will not do better on a retry.
  bool refused_by_tls() const { return refused_by_tls_; }
  // True once we sent the peer an Error and closed (send_error_and_close): a refusal to log.
  bool sent_error() const { return sent_error_; }

 private:
  using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  boost::asio::ip::tcp::socket& socket();  // the TCP socket under either stream
  // Runs f(stream) with the plain socket or the TLS stream: the framing is written once.
  template <typename F>
  void with_stream(F&& f) { std::visit(std::forward<F>(f), stream_); }
  void await_first_byte();  // TLS server: a handshake record, or a plain peer told to use TLS
  void handshake();
  // Why a read or write failed, in words (TLS failures described by tls.h).
  std::string why_failed(const boost::system::error_code& ec, const char* eof_text);
  // The frames already read, dispatched one by one, then more from the socket; unless too much is
  // unsent: then after the next write.
  void read_next();
  enum class Taken : uint8_t { kFrame, kNeedMore, kStop };  // kStop: refused, closed or closing
  Taken take_frame();  // the next whole frame in the read buffer, checked and dispatched
  void read_more();    // reads what the socket has into the buffer, then read_next()
  void took(const boost::system::error_code& ec, size_t n);  // a read's outcome: n bytes, or why not
  void deliver(size_t bytes);
  void flush();
  void write_plain(bool in_flush);  // writing_ from written_ on, in place while the socket takes it
  void wrote(const boost::system::error_code& ec);  // the write in flight ended: what comes next
  void drained();      // draining, and all is written: shut down and linger, or close
  void keep_only_frame_begun();  // cut_off: of writing_, only the unwritten rest of its frame
  // send_error_and_close once draining: the Error appended, on_close told, a linger to close.
  void tell_and_close(const std::string& message, uint64_t job_id);
  // A send buffer that grew past kKeepBodyBytes is freed once written (a burst's room is not kept).
  void release_written();
  // held_bytes() brought up to date in the UnsentTotal, if any; its owner told when past its limit.
  void account();
  void arm_idle_timer(std::chrono::steady_clock::time_point silent_since);
  void transition(State to);

  // What is on the socket's sending side, inside the open and draining states. A TLS connection
  // starts handshaking (a server first waits for the peer's first byte) and frames sent meanwhile
  // queue; once it is done (or failed) the channel is idle, and from idle each write goes out and
  // comes back. A peer of the other protocol (plain TCP on a TLS port, a ClientHello on a plain one)
  // gets one frame in the clear, and refusing is final: the connection lingers and closes.
  // handshaking -> idle | refusing; idle -> writing | refusing; writing -> idle.
  enum class Channel : uint8_t { kHandshaking, kIdle, kWriting, kRefusing };
  void move(Channel to);  // the one place the channel changes; checks the move
  bool can_write() const { return channel_ == Channel::kIdle; }
  void refuse_in_the_clear(const char* told, const char* why);  // `why`: the reason closed

  std::variant<boost::asio::ip::tcp::socket, TlsStream> stream_;
  TlsRole role_;
  bool refused_by_tls_ = false;
  bool sent_error_ = false;
  boost::asio::steady_timer idle_timer_;
  std::chrono::milliseconds idle_{0};
  std::shared_ptr<const LoopWatchdog> watchdog_;
  std::chrono::steady_clock::time_point last_rx_;
  uint32_t max_frame_bytes_;
  Handlers handlers_;
  std::string remote_;
  // Bytes read and not yet taken as frames: in_[in_begin_, in_end_) of in_capacity_; need_ is the
  // length (header included) of the frame being read once its header is in, else 0.
  std::unique_ptr<char[]> in_;
  size_t in_capacity_ = 0, in_begin_ = 0, in_end_ = 0, need_ = 0;
  std::unique_ptr<capnp::word[]> body_;  // body_words_ words: the frame being dispatched
  size_t body_words_ = 0;
  std::string out_;      // frames queued while a write is in flight
  std::string writing_;  // the frames of the write in flight
  size_t written_ = 0;   // of writing_, the bytes on the socket (plain sockets; TLS: 0)
  size_t max_unsent_bytes_ = 0;  // 0: max(kMaxUnsentBytes, 2 frames)
  std::shared_ptr<UnsentTotal> unsent_total_;
  size_t counted_bytes_ = 0;  // held_bytes() as last added to unsent_total_
  std::string cut_off_why_;   // why cut_off() ended this connection (said when it closes)
  State state_ = State::kOpen;
  Channel channel_ = Channel::kIdle;
  bool flush_posted_ = false;  // a flush() is posted for the end of this turn (send())
  // Flow control: reading waits until the peer has taken what we owe it (resumed only while open).
  bool read_paused_ = false;
  bool drained_ = false;  // the last read took less than it had room for: the socket was empty
  bool told_closed_ = false;  // on_close has run: frames read from now on are dropped
};

// Builds a one-off message: `fill` gets the root Message builder.
template <typename Fill>
void send_message(FramedConnection& c, Fill&& fill) {
  OutgoingMessage message;
  fill(message.initRoot<wire::Message>());
  c.send(message);
}

}  // namespace psched
