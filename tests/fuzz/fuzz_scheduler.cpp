// libFuzzer target: a real psched::Scheduler, in process, on its own io_context, fed by up to two
// loopback connections whose bytes come from the fuzzer. It reaches everything a peer can reach:
// framing (length checks, partial frames), Cap'n Proto decoding under reader_options_for(), Hello
// (version, role, token), every client and worker message, job validation, dispatch and results.
// After each frame the chunk state machine must agree with the workers' windows; after the
// input the connections close and the scheduler must hold nothing (no worker, client or job).
// ASan/UBSan catch the rest.
//
// Input: byte 0 picks the mode. Mode & 0x80: the rest is written raw to connection A (framing).
// Otherwise (mode % 3) is A's role and (mode / 3 % 3) B's: 0 none (no Hello sent for it), 1 client,
// 2 worker. Then records [to: 1 byte, bit 0 = B][length: 2 bytes LE][length bytes], each sent as
// one frame (zero-padded to a multiple of 8 bytes) on its connection and handled before the next.
#include <arpa/inet.h>
#include <capnp/message.h>
#include <capnp/serialize.h>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "common/chunk_grid.h"
#include "common/framing.h"
#include "common/job_spec.h"
#include "common/wire_convert.h"
#include "fuzz_input.h"
#include "scheduler/scheduler.h"

namespace {

namespace asio = boost::asio;
namespace wire = psched::wire;
using psched::fuzz::kToken;

// Jobs above this many chunks are not sent: the scheduler keeps state per chunk (up to kMaxChunks,
// ~640 MB, which it allows), and inputs that allocate that much make the fuzzer crawl.
constexpr uint64_t kMaxFuzzChunks = uint64_t{1} << 16;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_scheduler: invariant broken: %s\n", what.c_str());
  std::abort();
}

class Connection {
 public:
  explicit Connection(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // On loopback the handshake completes in the kernel at once (into the listen backlog).
    connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  }
  ~Connection() { close(fd_); }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

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
void pump(asio::io_context& io) {
  for (int idle_rounds = 0; idle_rounds < 2;) {
    io.restart();
    idle_rounds = io.poll() == 0 ? idle_rounds + 1 : 0;
  }
}

// True when `frame_bytes` is a Submit that would be accepted with more than kMaxFuzzChunks chunks.
bool too_big_to_fuzz(const std::string& frame_bytes) {
  if (frame_bytes.size() < psched::kFrameHeaderBytes + sizeof(capnp::word)) return false;
  const size_t n = frame_bytes.size() - psched::kFrameHeaderBytes;
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(n / sizeof(capnp::word));
  std::memcpy(words.begin(), frame_bytes.data() + psched::kFrameHeaderBytes, words.size() * sizeof(capnp::word));
  try {
    capnp::FlatArrayMessageReader reader(words, psched::reader_options_for(n));
    auto m = reader.getRoot<wire::Message>();
    if (m.which() != wire::Message::SUBMIT) return false;
    const psched::JobSpec spec = psched::from_wire(m.getSubmit().getSpec());
    if (!psched::validate(spec)) return false;
    const psched::JobSpec s = psched::normalized(spec);
    return s.chunks() > kMaxFuzzChunks;
  } catch (const kj::Exception&) {
    return false;
  }
}

// What each worker's window counts per job is exactly what the job says runs on that worker, and
// every running chunk runs on a worker that is still there.
void check_consistent(const psched::Scheduler& s) {
  for (const auto& [wid, w] : s.workers()) {
    for (const auto& [job_id, held] : w->in_flight.by_job()) {
      auto it = s.jobs().find(job_id);
      if (it == s.jobs().end()) fail("worker holds chunks of a job that is gone");
      if (it->second->chunks() <= 4096 && it->second->running_chunks_of(wid).size() != held)
        fail("worker's window differs from the chunks running on it");
    }
  }
  for (const auto& [job_id, job] : s.jobs()) {
    if (job->chunks() > 4096) continue;
    uint64_t done = 0;
    for (uint64_t c = 0; c < job->chunks(); ++c) {
      if (job->state(c) == psched::TaskState::kDone) ++done;
      if (job->state(c) != psched::TaskState::kRunning) continue;
      auto w = s.workers().find(job->running_on(c));
      if (w == s.workers().end() || w->second->in_flight.of_job(job_id) == 0)
        fail("running chunk not held by a worker");
    }
    if (done != job->done()) fail("done count differs from the chunk states");
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const psched::fuzz::Input input = psched::fuzz::parse_input(data, size);

  asio::io_context io;
  psched::SchedulerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.token = kToken;
  config.max_frame_bytes = 1 << 20;
  auto scheduler = std::make_unique<psched::Scheduler>(io, config);
  if (!scheduler->start()) return 0;  // no port: nothing to test
  {
    Connection a(scheduler->port());
    std::unique_ptr<Connection> b;
    if (input.role_b != psched::fuzz::Role::kNone) b = std::make_unique<Connection>(scheduler->port());
    pump(io);
    if (input.raw) {
      a.write(input.raw_bytes);
      pump(io);
      a.drain();
    } else {
      if (input.role_a != psched::fuzz::Role::kNone) a.write(psched::fuzz::hello_frame(input.role_a));
      if (b) b->write(psched::fuzz::hello_frame(input.role_b));
      pump(io);
      for (const auto& record : input.records) {
        const std::string bytes = psched::fuzz::frame_of_body(record.body);
        if (too_big_to_fuzz(bytes)) continue;
        Connection& to = record.to_b && b ? *b : a;
        to.write(bytes);
        pump(io);
        a.drain();
        if (b) b->drain();
        check_consistent(*scheduler);
      }
    }
    a.hang_up();
    if (b) b->hang_up();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!(scheduler->workers().empty() && scheduler->clients().empty() && scheduler->jobs().empty())) {
      if (std::chrono::steady_clock::now() > deadline) fail("peers or jobs left after every connection closed");
      io.restart();
      io.run_for(std::chrono::milliseconds(1));
    }
  }
  scheduler->shutdown("fuzz input done", [] {});
  pump(io);
  scheduler.reset();
  return 0;
}
