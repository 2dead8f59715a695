// One fuzz input (fuzz_input.h) played against a real psched::Scheduler in process, over loopback
// connections of any transport: fuzz_scheduler plays it over plain TCP, fuzz_tls inside mutual TLS.
// Here: the scheduler's configuration, the loop driver, the invariants checked after every frame and
// at the end, and the plain connection. Header-only: the fuzz targets are single files.
#pragma once

#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "core/chunk_grid.h"
#include "core/job_spec.h"
#include "fuzz_input.h"
#include "net/framing.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched::fuzz {

// Jobs above this many chunks are not sent: check_consistent() below asks every chunk's state, and
// workers that report a job of 2^40 one-element chunks make the fuzzer crawl.
constexpr uint64_t kMaxFuzzChunks = uint64_t{1} << 16;

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: invariant broken: %s\n", what.c_str());
  std::abort();
}

// The scheduler under test: loopback, a free port, the token, frames up to 1 MB.
inline SchedulerConfig fuzz_config() {
  SchedulerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.token = kToken;
  config.max_frame_bytes = 1 << 20;
  return config;
}

// A plain TCP connection to the scheduler, non-blocking: every call returns at once, so one thread
// runs both ends (the scheduler's loop in between, by pump()).
class PlainConnection {
 public:
  explicit PlainConnection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // On loopback the handshake completes in the kernel at once (into the listen backlog).
    connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ~PlainConnection() { close(fd_); }
  PlainConnection(const PlainConnection&) = delete;
  PlainConnection& operator=(const PlainConnection&) = delete;

  int fd() const { return fd_; }
  // Writes what the socket takes now; the rest is dropped (the scheduler may have stopped reading
  // or closed us, both valid outcomes).
  void write(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += size_t(n);
    }
  }
  // Reads and discards what the scheduler sent, so that its writes never back up.
  void drain() {
    static char buf[1 << 16];
    while (::recv(fd_, buf, sizeof(buf), 0) > 0) {
    }
  }
  void hang_up() { shutdown(fd_, SHUT_RDWR); }

 private:
  int fd_ = -1;
};

// Runs every handler that is ready, until none is (loopback delivers within the send call).
inline void pump(boost::asio::io_context& io) {
  for (int idle_rounds = 0; idle_rounds < 2;) {
    io.restart();
    idle_rounds = io.poll() == 0 ? idle_rounds + 1 : 0;
  }
}

// True when `frame_bytes` is a Submit that would be accepted with more than kMaxFuzzChunks chunks.
inline bool too_big_to_fuzz(const std::string& frame_bytes) {
  if (frame_bytes.size() < kFrameHeaderBytes + sizeof(capnp::word)) return false;
  const size_t n = frame_bytes.size() - kFrameHeaderBytes;
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(n / sizeof(capnp::word));
  std::memcpy(words.begin(), frame_bytes.data() + kFrameHeaderBytes, words.size() * sizeof(capnp::word));
  try {
    capnp::FlatArrayMessageReader reader(words, reader_options_for(n));
    auto m = reader.getRoot<wire::Message>();
    if (m.which() != wire::Message::SUBMIT) return false;
    const JobSpec spec = from_wire(m.getSubmit().getSpec());
    if (!validate(spec)) return false;
    return normalized(spec).chunks() > kMaxFuzzChunks;
  } catch (const kj::Exception&) {
    return false;
  }
}

// What each worker's window counts per job is exactly what the job says runs on that worker (its
// chunks, and the chunks of its verify copies not in yet), and every running chunk runs on a
// worker that is still there.
inline void check_consistent(const Scheduler& s) {
  for (const auto& [wid, w] : s.workers()) {
    for (const auto& [job_id, held] : w->in_flight.by_job()) {
      auto it = s.jobs().find(job_id);
      if (it == s.jobs().end()) fail("worker holds chunks of a job that is gone");
      uint64_t running = 0;
      for (const ChunkRange& r : it->second->running_ranges_of(wid)) running += r.count;
      running += it->second->verify.awaited_from(wid);
      if (running != held.chunks) fail("worker's window differs from the chunks running on it");
    }
  }
  for (const auto& [job_id, job] : s.jobs()) {
    if (job->chunks() > 4096) continue;
    uint64_t done = 0;
    for (uint64_t c = 0; c < job->chunks(); ++c) {
      if (job->state(c) == ChunkState::kDone) ++done;
      if (job->state(c) != ChunkState::kRunning) continue;
      auto w = s.workers().find(*job->running_on(c));
      if (w == s.workers().end() || w->second->in_flight.of_job(job_id) == 0)
        fail("running chunk not held by a worker");
    }
    if (done != job->done()) fail("done count differs from the chunk states");
  }
}

// Runs the loop until the scheduler holds no worker, client or job (every connection has closed).
inline void settle_empty(boost::asio::io_context& io, const Scheduler& s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!(s.workers().empty() && s.clients().empty() && s.jobs().empty())) {
    if (std::chrono::steady_clock::now() > deadline) fail("peers or jobs left after every connection closed");
    io.restart();
    io.run_for(std::chrono::milliseconds(1));
  }
}

// Plays `input` on connections `a` and `b` (b may be null: no second peer) that are open and, for a
// TLS transport, past the handshake. `check` runs after the Hellos and after each frame; at the end
// both hang up and the scheduler must come to hold nothing. Conn: write(bytes), drain(), hang_up(),
// as PlainConnection has them.
template <typename Conn>
void play(boost::asio::io_context& io, const Scheduler& scheduler, const Input& input, Conn& a, Conn* b,
          const std::function<void()>& check) {
  if (input.raw) {
    a.write(input.raw_bytes);
    pump(io);
    a.drain();
    check();
  } else {
    if (input.role_a != Role::kNone) a.write(hello_frame(input.role_a));
    if (b && input.role_b != Role::kNone) b->write(hello_frame(input.role_b));
    pump(io);
    check();
    for (const auto& record : input.records) {
      const std::string bytes = frame_of_body(record.body);
      if (too_big_to_fuzz(bytes)) continue;
      Conn& to = record.to_b && b ? *b : a;
      to.write(bytes);
      pump(io);
      a.drain();
      if (b) b->drain();
      check();
    }
  }
  a.hang_up();
  if (b) b->hang_up();
  settle_empty(io, scheduler);
}

}  // namespace psched::fuzz
