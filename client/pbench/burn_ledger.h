// pbench --burn's record of a cluster acceptance run, and the verdicts drawn from it. The burn loop
// (burn.cpp) feeds it what it sees: the worker list with each GPU's NVML health once a second,
// each finished job's verify mismatches, the scheduler's notices, a worker leaving. The ledger
// decides, from that alone, which GPU passes, warns or fails and why: a pure policy that tests
// drive without a cluster (tests/client/burn_ledger_test.cpp). Workers are told apart by name, so
// a worker that reconnects (a new id) keeps its record.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pclient/client.h"

namespace pbench {

// What makes a GPU warn (failures need no threshold: any is one).
struct BurnLimits {
  double slow_fraction = 0.9;      // throughput below this share of its model's median: warn
  double temperature_limit_c = 85;  // hotter than this at any heartbeat: warn
};

// A GPU's or the cluster's verdict is pclient::BurnVerdict, the type the dashboard is sent as well.
const char* verdict_name(pclient::BurnVerdict v);  // "pass", "warn", "fail"

// One GPU (worker) over the burn.
// A count of memory faults that must not rise during the burn (remapped rows, retired pages): the
// figure at the first heartbeat that had one and the highest since. seen false: never reported,
// so unknown (not judged).
struct RisingCount {
  bool seen = false;
  uint64_t start = 0, now = 0;
  // Notes a heartbeat's figure; true when it is above every earlier one.
  bool note(uint64_t figure) {
    if (!seen) start = now = figure;
    seen = true;
    const bool rose = figure > now;
    now = std::max(now, figure);
    return rose;
  }
  bool rose() const { return seen && now > start; }
};

struct BurnGpu {
  uint32_t worker_id = 0;  // its latest id (a reconnect gets a new one)
  std::string name, host, device, uuid;
  double joined_seconds = 0;       // first seen, since the burn began
  double last_seen_seconds = 0;    // last listed by the scheduler
  double left_seconds = -1;        // gone from the list (-1: still there)
  std::string last_words;          // why it left, as far as anyone said
  uint64_t bytes_at_join = 0, bytes_now = 0;  // bytes_reduced as its worker counts them
  uint64_t chunks_at_join = 0, chunks_now = 0;
  double busy_at_join = 0, busy_now = 0;      // compute seconds as its worker counts them
  bool has_gpu = false;            // NVML figures came with its heartbeats
  bool ecc_seen = false;
  uint64_t ecc_uncorrected_start = 0, ecc_uncorrected_now = 0;
  // The narrowest width and the best generation seen (a link drops its generation when idle).
  uint32_t pcie_generation = 0, pcie_width = 0, pcie_max_width = 0, pcie_max_generation = 0;
  // Remapped rows (corrected + uncorrected), and retired pages (GPUs before Ampere; both causes);
  // a pending remap, a failed one or a pending retirement seen at any heartbeat.
  RisingCount remapped_rows, retired_pages;
  bool remap_pending = false, remap_failed = false, retired_pending = false;
  uint32_t max_temperature_c = 0;
  uint64_t throttle_reasons = 0;   // OR of every heartbeat's bits
  pclient::GpuHealth last_health;  // its last heartbeat's figures (its last words' context)
  // As they happened (mismatches, errors, departures): the first kMaxFailuresListed, then counted
  // (a liar that reconnects is thrown off again and again).
  std::vector<std::string> failures;
  uint64_t failures_unlisted = 0;
  uint64_t mismatches = 0;         // verify votes its copy lost (or tied with no third GPU)
  // Over time: seconds since the burn began, bytes/s since the previous point, SM clock (MHz),
  // temperature (C), power (W).
  struct Point {
    double seconds = 0, bytes_per_second = 0, sm_clock_mhz = 0, temperature_c = 0, power_watts = 0;
  };
  std::vector<Point> series;

  double present_seconds() const;  // how long it took part
  // Bytes reduced per second of its own compute time (the stragglers' measure: with every block
  // computed twice, a slow GPU holds its peer back, so wall-clock rates would even out); per
  // second present when it reported no compute time.
  double bytes_per_second() const;
};

// A GPU's verdict: fail and warn reasons, each one short line.
struct GpuVerdict {
  pclient::BurnVerdict verdict = pclient::BurnVerdict::kPass;
  std::vector<std::string> failures, warnings;
  double median_bytes_per_second = 0;  // of the GPUs of its model
};

// One verify mismatch as the burn keeps it: the job's shape, the chunk(s) and every copy.
struct BurnMismatch {
  uint64_t job_id = 0;
  std::string job;  // "2000 x 2000 in 100 x 100 chunks, normal seed 3"
  pclient::VerifyMismatch mismatch;
};

class BurnLedger {
 public:
  explicit BurnLedger(BurnLimits limits = {}) : limits_(limits) {}

  // The scheduler's worker list at `seconds`: new workers join, known ones update their figures,
  // and any that are missing have left (a failure, with what was said of them).
  void observe(const std::vector<pclient::WorkerInfo>& workers, double seconds);
  // A finished job's verify findings: each copy that lost the vote fails its GPU, naming the chunk.
  void note_result(const pclient::Result& result, const std::string& job_text);
  // A scheduler notice ("worker 3 'gpu-1' thrown off: result for chunk 5 ...", "chunk 7 took down
  // ..."): kept as an event; one about a named worker fails that worker with it.
  void note_notice(const std::string& notice, double seconds);
  // Local mode: the process of the worker named `name` ended (`how`: "its process 123 killed by
  // signal 9 (Killed)"), a cause psched cannot know. Its GPU fails with it, and it opens the
  // worker's last words, so the line that it left says how.
  void note_process_exit(const std::string& name, const std::string& how, double seconds);
  // A job that failed or could not run: a cluster-level failure.
  void note_job_error(const std::string& error, double seconds);
  // The burn ran this long (the clock the verdicts' throughput uses for GPUs still present).
  void finish(double seconds) { end_seconds_ = seconds; }

  GpuVerdict verdict_of(const BurnGpu& gpu) const;
  pclient::BurnVerdict cluster_verdict() const;
  // The verdicts so far, as the scheduler's dashboard shows them (each GPU's first failure or
  // warning as its reason, cut to the wire's bound), `seconds` into a burn of `total_seconds`.
  pclient::BurnStatus status(double seconds, double total_seconds) const;
  const std::map<std::string, BurnGpu>& gpus() const { return gpus_; }
  const std::vector<BurnMismatch>& mismatches() const { return mismatches_; }
  uint64_t mismatch_count() const { return mismatch_count_; }
  struct Event {
    double seconds = 0;
    std::string text;
  };
  const std::vector<Event>& events() const { return events_; }
  const std::vector<std::string>& cluster_failures() const { return cluster_failures_; }
  const BurnLimits& limits() const { return limits_; }
  double end_seconds() const { return end_seconds_; }

 private:
  BurnGpu* by_id(uint32_t id);
  void fail(BurnGpu& gpu, const std::string& why, double seconds);
  void add_event(double seconds, std::string text);
  double median_of_model(const std::string& device) const;

  BurnLimits limits_;
  std::map<std::string, BurnGpu> gpus_;  // by worker name
  std::vector<BurnMismatch> mismatches_;  // the first kMaxMismatches
  uint64_t mismatch_count_ = 0;
  std::vector<Event> events_;
  std::vector<std::string> cluster_failures_;
  double end_seconds_ = 0;
};

// Exit code of a burn: 0 when every GPU passed, kExitFailure with any failure, kExitBurnWarnings
// when the worst is a warning.
int burn_exit_code(pclient::BurnVerdict cluster);

}  // namespace pbench
