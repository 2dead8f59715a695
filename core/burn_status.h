// A running burn-in as psched shows it (pbench --burn's watcher sends it about once a second, the
// wire's BurnStatus): per GPU its verdict so far and why, its throughput and chunks, and the
// cluster's verdict. validate() holds the limits on what a client may make psched keep, each with
// its reason; the scheduler keeps only what passes (scheduler/burn_board.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace psched {

enum class BurnVerdict : uint8_t { kPass, kWarn, kFail };
const char* burn_verdict_name(BurnVerdict v);  // "pass", "warn", "fail"

// A burn lists every worker of a fleet: 4096 lines of at most ~400 bytes stay under 2 MB, an
// eighth of the default frame, and a dashboard page that a browser still draws.
inline constexpr size_t kMaxBurnGpus = 4096;
// A reason is one line for a person; the burn's own lines are under 200 bytes.
inline constexpr size_t kMaxBurnReasonBytes = 512;
// Burns held at once (one per client connection): 8 x 4096 GPUs bound psched's memory for them to
// ~16 MB whatever many clients send. A ninth is refused until one ends.
inline constexpr size_t kMaxBurnsHeld = 8;

struct BurnGpuStatus {
  std::string worker;  // its name, at most kMaxPeerNameBytes
  BurnVerdict verdict = BurnVerdict::kPass;
  std::string reason;  // the first failure or warning ("" when passing)
  double bytes_per_second = 0;
  uint64_t chunks = 0;
  uint64_t mismatches = 0;
  bool gone = false;  // left or lost during the burn
};

struct BurnStatus {
  BurnVerdict verdict = BurnVerdict::kPass;
  double elapsed_seconds = 0, total_seconds = 0;
  bool ended = false;
  std::vector<BurnGpuStatus> gpus;
};

// Ok, or what is wrong, naming the value and the limit: too many GPUs, a name or reason too long
// or not printable, a figure not finite or negative, elapsed beyond 30 days.
Status validate(const BurnStatus& burn);

}  // namespace psched
