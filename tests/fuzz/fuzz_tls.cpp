// libFuzzer target: psched's TLS port. A real psched::Scheduler with mutual TLS (the contexts of
// make_tls_context, from certificates deploy/make-certs.sh made once at start), in process, on its
// own io_context, fed by loopback connections whose bytes come from the fuzzer: the first-byte
// check that tells TLS from plain TCP, garbage and cut handshakes, refused certificates, and, past a
// good handshake, everything fuzz_scheduler reaches, inside TLS. Invariants: a peer without a
// cluster certificate is never admitted; a peer with one always completes the handshake; after
// each frame those of fuzz_scheduler (fuzz_session.h); after the input the scheduler holds nothing
// and (checked after every 8th input) still welcomes a good TLS client. ASan/UBSan catch the rest.
//
// Input: byte 0 picks how the peers come, (byte 0 % 5): 0 plain TCP, the rest written raw to the
// TLS port; 1 TLS with the cluster's client certificate, 2 TLS without a certificate, 3 with another
// CA's, 4 with the cluster CA's expired one. For 1-4 (byte 0 / 5 % 2) caps the peers at TLS 1.2,
// and the rest is a fuzz_scheduler input (fuzz_input.h) played on one or two such connections.
#include <openssl/ssl.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <capnp/serialize.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz_input.h"
#include "fuzz_session.h"
#include "net/framing.h"
#include "net/tls.h"
#include "scheduler/scheduler.h"
#include "support/test_certs.h"

namespace {

namespace asio = boost::asio;
namespace fuzz = psched::fuzz;
namespace wire = psched::wire;

enum class Approach : uint8_t { kPlain, kClusterCert, kNoCert, kOtherCaCert, kExpiredCert };
constexpr uint8_t kApproaches = 5;

// The contexts, made once: loading keys and certificates per input would dominate the run.
struct Contexts {
  std::shared_ptr<asio::ssl::context> server;
  std::shared_ptr<asio::ssl::context> client[kApproaches];  // by Approach; none for kPlain
};
std::unique_ptr<Contexts> contexts;

// A good client is checked after one input in this many (and after the first).
constexpr uint64_t kGoodClientEvery = 8;

// How far the inputs got, printed at exit: proof that the fuzzer gets past the handshake.
struct Reached {
  uint64_t inputs = 0, good_handshakes = 0, admitted = 0;
} reached;

// A client context as tls_test's hand-made peers have: trusts `ca_file`, presents `files`' pair when
// given (another CA's, an expired one: what make_tls_context refuses to load), no start-up checks.
std::shared_ptr<asio::ssl::context> stranger_context(const std::string& ca_file, const psched::TlsFiles* files) {
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  ctx->load_verify_file(ca_file);
  if (files) {
    ctx->use_certificate_chain_file(files->cert_file);
    ctx->use_private_key_file(files->key_file, asio::ssl::context::pem);
  }
  ctx->set_verify_mode(asio::ssl::verify_peer);
  return ctx;
}

// A TLS client on a non-blocking socket: every call returns at once, the scheduler's loop runs in
// between (pump), so one thread drives both ends. The interface of PlainConnection, for play().
class TlsConnection {
 public:
  TlsConnection(asio::io_context& io, uint16_t port, asio::ssl::context& ctx, bool tls12_only)
      : io_(io), tcp_(port), ssl_(SSL_new(ctx.native_handle())) {
    SSL_set_fd(ssl_, tcp_.fd());
    if (tls12_only) SSL_set_max_proto_version(ssl_, TLS1_2_VERSION);
    SSL_set_connect_state(ssl_);
  }
  ~TlsConnection() { SSL_free(ssl_); }
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  // True when the handshake completed on our side. Under TLS 1.3 the server checks our certificate
  // after that: its refusal shows at the next read.
  bool handshake() {
    for (int round = 0; round < 64; ++round) {
      const int r = SSL_do_handshake(ssl_);
      if (r == 1) return true;
      const int e = SSL_get_error(ssl_, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) return false;
      fuzz::pump(io_);
    }
    return false;
  }
  // All of `bytes` as TLS records, or (the connection refused or closed) nothing more.
  void write(const std::string& bytes) {
    if (broken_ || bytes.empty()) return;
    if (SSL_write(ssl_, bytes.data(), int(bytes.size())) <= 0) broken_ = true;
  }
  // What the scheduler sent, decrypted; drain() discards it.
  std::string read() {
    std::string got;
    char buf[1 << 14];
    int n = 0;
    while ((n = SSL_read(ssl_, buf, sizeof(buf))) > 0) got.append(buf, size_t(n));
    return got;
  }
  void drain() { read(); }
  // close_notify when the handshake was done (a clean TLS close), then the socket.
  void hang_up() {
    if (SSL_is_init_finished(ssl_)) SSL_shutdown(ssl_);
    tcp_.hang_up();
  }

 private:
  asio::io_context& io_;
  fuzz::PlainConnection tcp_;
  SSL* ssl_;
  bool broken_ = false;
};

// The first frame of `bytes` is a Welcome.
bool starts_with_welcome(const std::string& bytes) {
  if (bytes.size() < psched::kFrameHeaderBytes) return false;
  const uint32_t n = psched::decode_frame_length(reinterpret_cast<const uint8_t*>(bytes.data()));
  if (n == 0 || n % sizeof(capnp::word) != 0 || bytes.size() < psched::kFrameHeaderBytes + n) return false;
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(n / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data() + psched::kFrameHeaderBytes, n);
  try {
    capnp::FlatArrayMessageReader reader(words, psched::reader_options_for(n));
    return reader.getRoot<wire::Message>().which() == wire::Message::WELCOME;
  } catch (const kj::Exception&) {
    return false;
  }
}

// Whatever the input did, the scheduler still shakes hands with a good client and welcomes it.
void check_serves_good_client(asio::io_context& io, const psched::Scheduler& scheduler) {
  {
    TlsConnection good(io, scheduler.port(), *contexts->client[uint8_t(Approach::kClusterCert)], false);
    fuzz::pump(io);
    if (!good.handshake()) fuzz::fail("a good TLS client's handshake failed after the input");
    good.write(fuzz::hello_frame(fuzz::Role::kClient));
    fuzz::pump(io);
    if (!starts_with_welcome(good.read())) fuzz::fail("a good TLS client was not welcomed after the input");
    good.hang_up();
  }
  fuzz::settle_empty(io, scheduler);
}

// Plays the input's peers with `approach`; returns whether any was admitted.
bool play_tls(asio::io_context& io, const psched::Scheduler& scheduler, Approach approach, bool tls12_only,
              const fuzz::Input& input) {
  asio::ssl::context& ctx = *contexts->client[uint8_t(approach)];
  TlsConnection a(io, scheduler.port(), ctx, tls12_only);
  std::unique_ptr<TlsConnection> b;
  if (input.role_b != fuzz::Role::kNone) b = std::make_unique<TlsConnection>(io, scheduler.port(), ctx, tls12_only);
  fuzz::pump(io);
  const bool member = approach == Approach::kClusterCert;
  for (TlsConnection* c : {&a, b.get()}) {
    if (c && !c->handshake() && member) fuzz::fail("a TLS handshake with the cluster's certificate failed");
  }
  if (member) ++reached.good_handshakes;
  bool admitted = false;
  fuzz::play(io, scheduler, input, a, b.get(), [&] {
    fuzz::check_consistent(scheduler);
    if (scheduler.clients().empty() && scheduler.workers().empty()) return;
    admitted = true;
    if (!member) fuzz::fail("a peer without a cluster certificate was admitted");
  });
  return admitted;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  signal(SIGPIPE, SIG_IGN);  // OpenSSL writes to our sockets with write(): a closed peer must not kill us
  // Loaded into the contexts, the files are no longer needed: the directory goes at the end of scope.
  const psched::test::TestCerts certs;
  auto server = psched::make_tls_context(certs.files("scheduler"), psched::TlsRole::kServer);
  auto client = psched::make_tls_context(certs.files("client"), psched::TlsRole::kClient);
  if (!server || !client) {
    std::fprintf(stderr, "fuzz_tls: %s\n", (server ? client.message() : server.message()).c_str());
    std::abort();
  }
  const std::string ca = certs.files("client").ca_file;
  const psched::TlsFiles other = certs.files("worker", "other"), expired = certs.files("expired");
  contexts.reset(new Contexts{*server,
                              {nullptr, *client, stranger_context(ca, nullptr), stranger_context(ca, &other),
                               stranger_context(ca, &expired)}});
  std::atexit([] {
    std::fprintf(stderr, "reached: %llu inputs; %llu past a handshake with the cluster's certificate, %llu with a "
                 "peer admitted inside TLS\n", (unsigned long long)reached.inputs,
                 (unsigned long long)reached.good_handshakes, (unsigned long long)reached.admitted);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  ++reached.inputs;
  const Approach approach = Approach(data[0] % kApproaches);
  const bool tls12_only = data[0] / kApproaches % 2 == 1;

  asio::io_context io;
  psched::SchedulerConfig config = fuzz::fuzz_config();
  config.tls = contexts->server;
  auto scheduler = std::make_unique<psched::Scheduler>(io, config);
  if (!scheduler->start()) return 0;  // no port: nothing to test
  if (approach == Approach::kPlain) {
    fuzz::Input raw;
    raw.raw = true;
    raw.raw_bytes.assign(reinterpret_cast<const char*>(data + 1), size - 1);
    fuzz::PlainConnection a(scheduler->port());
    fuzz::pump(io);
    fuzz::play(io, *scheduler, raw, a, static_cast<fuzz::PlainConnection*>(nullptr), [&] {
      if (!scheduler->clients().empty() || !scheduler->workers().empty()) fuzz::fail("a plain-TCP peer was admitted");
    });
  } else if (play_tls(io, *scheduler, approach, tls12_only, fuzz::parse_input(data + 1, size - 1))) {
    ++reached.admitted;
  }
  // Checking after every input cut the inputs per second from ~80 to ~45 (a handshake costs more
  // than the rest of an input); checking after the first makes a failure found here reproduce when
  // its input runs alone.
  if (reached.inputs % kGoodClientEvery == 1) check_serves_good_client(io, *scheduler);
  scheduler->shutdown("fuzz input done", [] {});
  fuzz::pump(io);
  scheduler.reset();
  return 0;
}
