// FramedConnection's TLS side: a server's look at the first byte (a plain peer on the TLS port is
// refused in the clear), the handshake, a refusal's linger before the close, and why a read or
// write failed, in words. The framing and reads are in net/connection.cpp, writes in
// net/connection_send.cpp.
#include <fmt/format.h>

#include <array>
#include <functional>

#include "net/connection.h"
#include "net/framing.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

// How long, and how many bytes, a connection refused at the TLS layer keeps reading after its last
// word (see linger_then_close).
constexpr auto kLingerTime = std::chrono::seconds(2);
constexpr size_t kLingerBytes = size_t{64} << 10;

// Closing a socket whose peer's bytes are still unread makes the kernel send a reset, which can
// destroy what we wrote last (a TLS alert, an Error frame in the clear) before the peer reads it.
// Instead: half-close, discard what the peer still sends (bounded in bytes and time), then run
// `done`, which closes.
void linger_then_close(const std::shared_ptr<FramedConnection>& self, tcp::socket& socket,
                       std::function<void()> done) {
  boost::system::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_send, ignored);
  struct Linger {
    std::array<char, 4096> discard;
    size_t left = kLingerBytes;
    std::function<void()> done;
    asio::steady_timer timer;
    bool finished = false;
    void finish() {
      if (finished) return;
      finished = true;
      timer.cancel();
      done();
    }
  };
  auto linger = std::make_shared<Linger>(Linger{{}, kLingerBytes, std::move(done), asio::steady_timer(socket.get_executor()), false});
  linger->timer.expires_after(kLingerTime);
  linger->timer.async_wait([linger, self](const boost::system::error_code& ec) {
    if (!ec) linger->finish();
  });
  auto read = std::make_shared<std::function<void()>>();
  *read = [linger, self, &socket, read] {
    socket.async_read_some(asio::buffer(linger->discard),
                           [linger, self, read](const boost::system::error_code& ec, size_t n) {
                             if (linger->finished) {
                               *read = nullptr;  // break the cycle
                               return;
                             }
                             if (ec || n >= linger->left) {
                               *read = nullptr;
                               linger->finish();
                               return;
                             }
                             linger->left -= n;
                             (*read)();
                           });
  };
  (*read)();
}

}  // namespace

void FramedConnection::await_first_byte() {
  socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](const boost::system::error_code& ec) {
    if (!self->is_open()) return;
    if (ec) {
      self->close(ec.message());
      return;
    }
    unsigned char first = 0;
    boost::system::error_code peek_ec;
    const size_t n = self->socket().receive(asio::buffer(&first, 1), tcp::socket::message_peek, peek_ec);
    if (peek_ec == asio::error::would_block) {
      self->await_first_byte();
      return;
    }
    if (peek_ec || n == 0) {
      self->close(peek_ec ? peek_ec.message() : "peer closed the connection before the TLS handshake");
      return;
    }
    if (first != kTlsHandshakeRecord) {
      // A plain peer cannot read TLS: it is told in its own protocol.
      self->refuse_in_the_clear(kSchedulerSpeaksTls, kPlainPeerOnTlsPort);
      return;
    }
    self->handshake();
  });
}

void FramedConnection::handshake() {
  auto& tls = std::get<TlsStream>(stream_);
  tls.async_handshake(role_ == TlsRole::kServer ? asio::ssl::stream_base::server : asio::ssl::stream_base::client,
                      [self = shared_from_this()](const boost::system::error_code& ec) {
                        if (!self->is_open()) return;
                        self->move(Channel::kIdle);
                        if (ec) {
                          std::string why = "TLS handshake failed: " + self->why_failed(ec, "");
                          if (self->role_ != TlsRole::kServer) return self->close(why);
                          // Our alert is written; let the peer read it before the socket goes.
                          if (self->state_ == State::kOpen) self->transition(State::kDraining);
                          linger_then_close(self, self->socket(), [self, why] { self->close(why); });
                          return;
                        }
                        self->read_next();
                        if (!self->out_.empty()) self->flush();
                        else if (self->state_ == State::kDraining) self->close("closed by us");
                      });
}

// A peer of the other protocol gets one Error frame in the clear (a plain peer reads it; a TLS
// stack fails on it, and the log says why), then the connection lingers and closes.
void FramedConnection::refuse_in_the_clear(const char* told, const char* why) {
  refused_by_tls_ = true;
  if (state_ != State::kOpen) return close(why);
  OutgoingMessage m(128);
  m.initRoot<wire::Message>().initError().setMessage(told);
  writing_.clear();
  append_frame(m, writing_);
  transition(State::kDraining);
  move(Channel::kRefusing);
  asio::async_write(socket(), asio::buffer(writing_),
                    [self = shared_from_this(), why](const boost::system::error_code& ec, size_t) {
                      if (ec || !self->is_open()) return self->close(why);
                      linger_then_close(self, self->socket(), [self, why] { self->close(why); });
                    });
}

std::string FramedConnection::why_failed(const boost::system::error_code& ec, const char* eof_text) {
  const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
  if (eof && *eof_text) return eof_text;
  if (!eof && !is_tls_refusal(ec)) return ec.message();
  if (!eof) refused_by_tls_ = true;  // a peer that merely went away may come back
  SSL* ssl = nullptr;
  if (auto* tls = std::get_if<TlsStream>(&stream_)) ssl = tls->native_handle();
  return describe_tls_failure(ec, ssl, role_ == TlsRole::kServer ? "the peer" : "the scheduler");
}

}  // namespace psched
