#include "raw_peer.h"

#include <arpa/inet.h>
#include <capnp/serialize.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

#include "net/framing.h"

namespace psched::test {

namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() < 0 ? 0 : int(left.count());
}

}  // namespace

RawPeer::RawPeer(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd_);
    throw std::runtime_error(std::string("connect() failed: ") + std::strerror(errno));
  }
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // Non-blocking: every read and write below waits with poll() under a deadline.
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

RawPeer::~RawPeer() {
  if (fd_ >= 0) close(fd_);
}

bool RawPeer::send_bytes(const std::string& bytes, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += size_t(n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
      continue;
    }
    return false;  // EPIPE, ECONNRESET: the scheduler closed us
  }
  return true;
}

bool RawPeer::send_message(capnp::MessageBuilder& message) { return send_bytes(frame_of(message)); }

bool RawPeer::send_message(const std::function<void(wire::Message::Builder)>& fill) {
  return send_bytes(frame_of(fill));
}

bool RawPeer::hello_as_client(const std::string& token, uint32_t version) {
  return send_message([&](wire::Message::Builder m) {
    auto h = m.initHello();
    h.setRole(wire::Role::CLIENT);
    h.setProtocolVersion(version);
    h.setName("raw-client");
    h.setToken(capnp::Text::Reader(token.data(), token.size()));  // NULs and all
  });
}

bool RawPeer::hello_as_worker(uint32_t slots, const std::string& token) {
  return send_message([&](wire::Message::Builder m) {
    auto h = m.initHello();
    h.setRole(wire::Role::WORKER);
    h.setProtocolVersion(wire::PROTOCOL_VERSION);
    h.setName("raw-worker");
    h.setToken(capnp::Text::Reader(token.data(), token.size()));  // NULs and all
    auto w = h.initWorker();
    w.setBackend("cpu");
    w.setSlots(slots);
  });
}

bool RawPeer::read_exact(uint8_t* out, size_t n, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t got = 0;
  while (got < n) {
    if (closed_) return false;
    const ssize_t r = ::recv(fd_, out + got, n - got, 0);
    if (r > 0) {
      got += size_t(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed_ = true;
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
  }
  return true;
}

std::optional<Frame> RawPeer::read_frame(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t header[kFrameHeaderBytes];
  if (!read_exact(header, sizeof(header), timeout_ms)) return std::nullopt;
  const uint32_t bytes = decode_frame_length(header);
  if (bytes == 0 || bytes % sizeof(capnp::word) != 0 || bytes > kDefaultMaxFrameBytes)
    throw std::runtime_error("the scheduler sent a bad frame length " + std::to_string(bytes));
  auto words = std::make_shared<kj::Array<capnp::word>>(kj::heapArray<capnp::word>(bytes / sizeof(capnp::word)));
  if (!read_exact(reinterpret_cast<uint8_t*>(words->begin()), bytes, remaining_ms(deadline)))
    return std::nullopt;
  Frame f;
  f.reader = std::make_shared<capnp::FlatArrayMessageReader>(*words, reader_options_for(bytes));
  f.words = std::move(words);
  return f;
}

std::optional<Frame> RawPeer::read_until(wire::Message::Which kind, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto f = read_frame(remaining_ms(deadline));
    if (!f) return std::nullopt;
    if (f->which() == kind) return f;
  }
}

std::string RawPeer::read_error(int timeout_ms) {
  auto f = read_until(wire::Message::ERROR, timeout_ms);
  return f ? std::string(f->message().getError().getMessage().cStr()) : std::string();
}

bool RawPeer::wait_closed(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[4096];
  while (!closed_) {
    const ssize_t r = ::recv(fd_, buf, sizeof(buf), 0);
    if (r > 0) continue;
    if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      closed_ = true;
      break;
    }
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
  }
  return true;
}

std::string length_prefix(uint32_t n) {
  const char h[4] = {char(n & 0xff), char((n >> 8) & 0xff), char((n >> 16) & 0xff),
                     char((n >> 24) & 0xff)};
  return std::string(h, 4);
}

std::string single_segment(const std::vector<uint64_t>& words) {
  std::string out = length_prefix(uint32_t(8 + words.size() * 8));
  const uint32_t table[2] = {0, uint32_t(words.size())};  // one segment of words.size() words
  out.append(reinterpret_cast<const char*>(table), sizeof(table));
  out.append(reinterpret_cast<const char*>(words.data()), words.size() * 8);
  return out;
}

std::string frame_of(capnp::MessageBuilder& message) {
  std::string out;
  append_frame(message, out);
  return out;
}

std::string frame_of(const std::function<void(wire::Message::Builder)>& fill) {
  capnp::MallocMessageBuilder m;
  fill(m.initRoot<wire::Message>());
  return frame_of(m);
}

std::string flat_of(const std::function<void(wire::Message::Builder)>& fill) {
  return frame_of(fill).substr(kFrameHeaderBytes);
}

FakeServer::FakeServer(std::function<void(int fd)> on_client, bool accept_connections) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(listen_fd_, 16) != 0 ||
      getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot listen on 127.0.0.1");
  port_ = ntohs(addr.sin_port);
  if (!accept_connections) return;
  thread_ = std::thread([this, on_client = std::move(on_client)] {
    for (;;) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;  // shutdown() in the destructor
      on_client(fd);
      close(fd);
    }
  });
}

FakeServer::~FakeServer() {
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

}  // namespace psched::test
