// RawPeer: a hostile or careless peer of psched for the abuse tests. It speaks the wire by hand over
// a plain blocking socket (no libpclient, no FramedConnection): it can send any bytes, any frame, any
// Cap'n Proto message, and read back what the scheduler answers, with deadlines on everything.
// Also: tiny servers that are not psched (one that never answers, one that sends junk) for pbench.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "proto/psched.capnp.h"

namespace psched::test {

// One frame the scheduler sent, decoded (copies share the buffer).
struct Frame {
  std::shared_ptr<kj::Array<capnp::word>> words;
  std::shared_ptr<capnp::FlatArrayMessageReader> reader;
  wire::Message::Which which() const { return message().which(); }
  wire::Message::Reader message() const { return reader->getRoot<wire::Message>(); }
};

class RawPeer {
 public:
  explicit RawPeer(uint16_t port);  // connects to 127.0.0.1:port (throws std::runtime_error)
  ~RawPeer();
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  // Best effort: false once the scheduler has closed (EPIPE/ECONNRESET) or timeout_ms passes.
  bool send_bytes(const std::string& bytes, int timeout_ms = 5000);
  bool send_message(capnp::MessageBuilder& message);
  bool send_message(const std::function<void(wire::Message::Builder)>& fill);
  bool hello_as_client(const std::string& token = "", uint32_t version = wire::PROTOCOL_VERSION);
  bool hello_as_worker(uint32_t slots = 1, const std::string& token = "");

  // The next frame, or nullopt when the connection closed or nothing came within timeout_ms.
  std::optional<Frame> read_frame(int timeout_ms = 5000);
  // Frames until one of `kind` arrives (others are skipped); nullopt on close or deadline.
  std::optional<Frame> read_until(wire::Message::Which kind, int timeout_ms = 5000);
  // Skips frames until an Error and returns its message; "" when the connection closed without one
  // or nothing came within timeout_ms.
  std::string read_error(int timeout_ms = 5000);
  // True once the scheduler has closed the connection (EOF or reset) within timeout_ms. Whatever
  // arrives meanwhile is discarded.
  bool wait_closed(int timeout_ms = 5000);

  int fd() const { return fd_; }

 private:
  bool read_exact(uint8_t* out, size_t n, int timeout_ms);
  int fd_ = -1;
  bool closed_ = false;
};

// The frame for `message`: 4-byte little-endian length, then the flat message.
std::string frame_of(capnp::MessageBuilder& message);
std::string frame_of(const std::function<void(wire::Message::Builder)>& fill);
// The flat message without the length prefix (to be corrupted by hand).
std::string flat_of(const std::function<void(wire::Message::Builder)>& fill);
// A 4-byte little-endian length prefix.
std::string length_prefix(uint32_t n);

// Hand-made messages: the frame of one segment holding `words`, and Cap'n Proto pointer words.
std::string single_segment(const std::vector<uint64_t>& words);
inline uint64_t struct_ptr(int32_t offset, uint16_t data_words, uint16_t ptr_words) {
  return (uint64_t(uint32_t(offset)) << 2) | (uint64_t(data_words) << 32) | (uint64_t(ptr_words) << 48);
}
inline uint64_t composite_list_ptr(int32_t offset, uint32_t words) {
  return 1 | (uint64_t(uint32_t(offset)) << 2) | (uint64_t(7) << 32) | (uint64_t(words) << 35);
}
inline uint64_t far_ptr(uint32_t segment, uint32_t offset) {
  return 2 | (uint64_t(offset) << 3) | (uint64_t(segment) << 32);
}

// A TCP server on 127.0.0.1 (free port) that is not psched. `on_client` runs on its own thread for
// each accepted socket (fd owned by the server). With accept_connections = false the socket listens
// and never accepts: the kernel completes handshakes into the backlog and nobody ever answers.
class FakeServer {
 public:
  explicit FakeServer(std::function<void(int fd)> on_client, bool accept_connections = true);
  ~FakeServer();
  uint16_t port() const { return port_; }

 private:
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace psched::test
