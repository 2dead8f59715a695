// ChunkVerifier: a job's verify state (Submit.verifyFraction; docs/design.md, "Verify"). A drawn
// chunk is computed again on a different worker once its first copy is in, and the copies are
// compared with same_bits() (core/partial.h); on a mismatch a third worker, where there is one,
// breaks the tie. Only chunks awaiting another copy hold a partial here, so the state stays as small
// as the copies in flight. The Job keeps the chunk in TaskState::kVerifying meanwhile; the scheduler
// (results.cpp, job_lifecycle.cpp, dispatch.cpp) moves copies between this and the workers.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/partial.h"
#include "scheduler/ids.h"

namespace psched {

// Most mismatches a JobResult lists (all are counted): a device wrong on every chunk of a 2^24-chunk
// job must not make a JobResult outgrow a frame (each listed mismatch is ~300 bytes on the wire).
inline constexpr size_t kMaxReportedMismatches = 1000;

// Whether `chunk` is drawn for verification: a hash of (seed, chunk) against `fraction`, so the same
// job spec draws the same chunks every time. fraction >= 1 draws every chunk, <= 0 none.
bool verify_drawn(uint64_t seed, uint64_t chunk, double fraction);

// One copy of a chunk: who computed it, on what, and what it got.
struct VerifyCopy {
  WorkerId worker = 0;
  std::string worker_name, device_name;
  PartialSum partial;
  bool suspect = false;  // the odd one out, or one of copies that disagree with no majority
};

struct VerifyMismatch {
  uint64_t chunk = 0;
  std::vector<VerifyCopy> copies;  // in the order computed
};

class ChunkVerifier {
 public:
  ChunkVerifier() = default;
  ChunkVerifier(double fraction, uint64_t seed) : fraction_(fraction), seed_(seed) {}

  bool on() const { return fraction_ > 0; }
  double fraction() const { return fraction_; }
  bool drawn(uint64_t chunk) const { return on() && verify_drawn(seed_, chunk, fraction_); }

  // The first copy of a drawn chunk is in: it is held, and the next copy queued.
  void first_copy(uint64_t chunk, VerifyCopy copy);

  bool has_queued() const { return queued_ > 0; }
  uint64_t queued() const { return queued_; }
  // Whether a connected worker outside `excluded` exists (the scheduler's answer, from its workers).
  using SomeoneElse = std::function<bool(const std::vector<WorkerId>& excluded)>;
  // Takes up to `max` queued copies that `worker` may run, marking them running on it, into `out`
  // (appended, in queue order). A copy goes to a worker that has not computed the chunk yet; to one
  // that has only when no other worker is connected (one worker: it computes the chunk twice).
  uint64_t take(WorkerId worker, uint64_t max, const SomeoneElse& someone_else,
                std::vector<uint64_t>& out);
  // The worker running the copy of `chunk` (nullopt: none running).
  std::optional<WorkerId> running_on(uint64_t chunk) const;
  std::vector<uint64_t> running_chunks_of(WorkerId worker) const;
  // A running copy goes back to the queue (its worker left, died or failed it); returns how many
  // times copies of this chunk have failed (blame = true counts, naming `worker_name`).
  uint32_t requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name, bool blame);
  // The workers a copy of `chunk` failed on (empty when none, or the chunk is settled).
  const std::vector<std::string>& failed_on(uint64_t chunk) const;

  // A running copy came back. Returns the partial the job keeps once the chunk is settled (the
  // copies agree, or a majority or no further worker decides), nullopt when another copy is queued
  // to break a tie. `mismatch` is set when this settled a mismatch.
  std::optional<PartialSum> copy_done(uint64_t chunk, VerifyCopy copy, const SomeoneElse& someone_else,
                                      const VerifyMismatch** mismatch);

  uint64_t verified() const { return verified_; }
  uint64_t same_worker() const { return same_worker_; }
  uint64_t mismatch_count() const { return mismatch_count_; }
  const std::vector<VerifyMismatch>& mismatches() const { return mismatches_; }  // the first ones
  uint64_t holding() const { return pending_.size(); }  // chunks holding a partial here

 private:
  // A held chunk's next copy: queued (in second_by_first_ or third_) or running on one worker. It
  // is settled when the copies decide; a settled chunk is erased, so it holds nothing.
  enum class NextCopy { kQueued, kRunning, kSettled };
  struct Pending {
    std::vector<VerifyCopy> copies;       // in so far
    NextCopy next = NextCopy::kQueued;
    WorkerId running_on = 0;              // while next == kRunning
    std::vector<std::string> failed_on;   // workers a copy failed on (blamed)
  };
  // The one place a held chunk's next copy changes state; checks the move (queued -> running,
  // running -> queued or settled). `worker` is the one it runs on (for kRunning).
  static void move(Pending& p, NextCopy to, WorkerId worker = 0);
  static bool running_there(const Pending& p, WorkerId worker) {
    return p.next == NextCopy::kRunning && p.running_on == worker;
  }
  void enqueue(uint64_t chunk, Pending& p, bool front);
  const VerifyMismatch& record_mismatch(uint64_t chunk, std::vector<VerifyCopy> copies);

  double fraction_ = 0;
  uint64_t seed_ = 0;
  std::map<uint64_t, Pending> pending_;  // chunks awaiting another copy: the only ones held
  // Queued second copies by the worker of the first (a worker skips only its own queue), and
  // queued third copies (after a mismatch; rare, so scanned).
  std::map<WorkerId, std::deque<uint64_t>> second_by_first_;
  std::deque<uint64_t> third_;
  uint64_t queued_ = 0;
  uint64_t verified_ = 0, same_worker_ = 0, mismatch_count_ = 0;
  std::vector<VerifyMismatch> mismatches_;
  VerifyMismatch last_mismatch_;  // the one copy_done() reports when the list is full
};

}  // namespace psched
