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
// fuzz_session.h plays the input; fuzz_tls plays the same inputs inside mutual TLS.
#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <cstdint>
#include <memory>

#include "fuzz_input.h"
#include "fuzz_session.h"
#include "scheduler/scheduler.h"

namespace fuzz = psched::fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const fuzz::Input input = fuzz::parse_input(data, size);

  boost::asio::io_context io;
  auto scheduler = std::make_unique<psched::Scheduler>(io, fuzz::fuzz_config());
  if (!scheduler->start()) return 0;  // no port: nothing to test
  {
    fuzz::PlainConnection a(scheduler->port());
    std::unique_ptr<fuzz::PlainConnection> b;
    if (input.role_b != fuzz::Role::kNone) b = std::make_unique<fuzz::PlainConnection>(scheduler->port());
    fuzz::pump(io);
    fuzz::play(io, *scheduler, input, a, b.get(), [&] { fuzz::check_consistent(*scheduler); });
  }
  scheduler->shutdown("fuzz input done", [] {});
  fuzz::pump(io);
  scheduler.reset();
  return 0;
}
