// RangeTable: where every chunk of one job stands (queued, queued as a suspect, running on a worker,
// held for verify, done), kept as ranges of consecutive chunks instead of a state per chunk. Its
// size follows what is in flight and what went wrong (a few entries per worker, one per re-queued
// range), never the job's length: a job of 2^40 chunks costs what a job of 10 does. Every change
// goes through move(), the one transition function, which checks the range is wholly in the state
// it leaves; the public events below are the only callers. Pure bookkeeping: no sockets, no clock
// (tests/scheduler/range_table_test.cpp drives it with random event sequences).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/chunk_range.h"
#include "scheduler/ids.h"

namespace psched {


// A first-in first-out list of ranges that allocates nothing until a range is queued (a std::deque
// allocates on construction: two per job were a twentieth of psched's CPU for 10^4 small jobs).
class RangeFifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  ChunkRange& front() { return items_[head_]; }
  const ChunkRange& front() const { return items_[head_]; }
  void push_back(ChunkRange r) { items_.push_back(r); }
  void pop_front() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    } else if (head_ >= 64 && 2 * head_ >= items_.size()) {  // the popped half goes: O(1) amortized
      items_.erase(items_.begin(), items_.begin() + std::ptrdiff_t(head_));
      head_ = 0;
    }
  }
  std::vector<ChunkRange>::const_iterator begin() const { return items_.begin() + std::ptrdiff_t(head_); }
  std::vector<ChunkRange>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<ChunkRange> items_;
  size_t head_ = 0;
};

// kHeld: the chunk's first copy is in and held by the job's BlockVerifier (scheduler/verify.h) until
// another worker's copy of its block agrees; only then is it done.
enum class ChunkState : uint8_t { kQueued, kSuspect, kRunning, kHeld, kDone };

class RangeTable {
 public:
  explicit RangeTable(uint64_t chunks) : chunks_(chunks) {}

  uint64_t chunks() const { return chunks_; }
  uint64_t done() const { return done_; }
  uint64_t running() const { return running_count_; }
  uint64_t held() const { return held_count_; }
  // Queued chunks: fresh, re-queued and suspects.
  uint64_t queued() const { return requeued_count_ + suspect_count_ + (chunks_ - next_fresh_); }
  bool complete() const { return done_ == chunks_; }
  // Queued chunks that may share a worker's window with others (all but suspects).
  bool has_ordinary() const { return !requeued_.empty() || next_fresh_ < chunks_; }
  // Chunks never handed out yet remain, and the first chunk of the oldest re-queued range (the next
  // take()'s, when there is one).
  bool has_fresh() const { return next_fresh_ < chunks_; }
  std::optional<uint64_t> next_requeued() const {
    return requeued_.empty() ? std::nullopt : std::optional<uint64_t>(requeued_.front().first);
  }
  bool has_suspects() const { return !suspects_.empty(); }
  // Chunks ever sent back to the queue by requeue(), to run again (a chunk re-queued twice counts
  // twice); chunks given back unstarted (give_back) are not retries.
  uint64_t requeued_total() const { return requeued_total_; }

  // Events. take(): the next run of at most `max` queued chunks (re-queued ones first, then fresh
  // ones in index order), now running on `worker`; requires has_ordinary() and max > 0. With
  // `align`, the run ends on a multiple of it unless it takes all that range has: cut back, or
  // taken on past `max` when cutting back leaves nothing (a verify job's blocks stay on one worker).
  // With `fresh_only`, re-queued chunks are left for another worker (requires has_fresh()).
  ChunkRange take(WorkerId worker, uint64_t max, uint64_t align = 0, bool fresh_only = false);
  // The first (at most `max`) chunks of the oldest suspect range, now running on `worker`;
  // requires has_suspects() and max > 0. oldest_suspect(): that range's length.
  ChunkRange take_suspect(WorkerId worker, uint64_t max);
  uint64_t oldest_suspect() const { return suspects_.empty() ? 0 : suspects_.front().count; }
  // Running chunks of `worker` finished: done. False (nothing changes) unless all of `r` is running
  // on `worker`.
  bool finish(ChunkRange r, WorkerId worker);
  // Running chunks' first copy is in and held for verify; false (nothing changes) unless all of
  // `r` runs on `worker`.
  bool hold(ChunkRange r, WorkerId worker);
  // Held chunks are settled: done. Requires every chunk of `r` held.
  void finish_held(ChunkRange r);
  // Running chunks go back to the queue: at the back of the re-queued ranges, or as a suspect range
  // (to run alone). False (nothing changes) unless all of `r` is running on `worker`.
  bool requeue(ChunkRange r, WorkerId worker, bool suspect);
  // Running chunks the worker gave back unstarted (a job's tail, for an idle worker): queued again,
  // not counted as retries. False (nothing changes) unless all of `r` is running on `worker`.
  bool give_back(ChunkRange r, WorkerId worker);
  uint64_t given_back_total() const { return given_back_total_; }

  // Queries.
  bool running_here(ChunkRange r, WorkerId worker) const;
  // Every chunk of `r` (which must lie inside the job) is done or held.
  bool all_settled(ChunkRange r) const;
  // The ranges running on `worker`, in chunk order (a scan of what is running).
  std::vector<ChunkRange> running_of(WorkerId worker) const;
  // One chunk's state, and its worker while it runs (scans the re-queued ranges: for tests, the
  // fuzzer and small jobs only).
  ChunkState state(uint64_t chunk) const;
  std::optional<WorkerId> running_on(uint64_t chunk) const;
  // Entries the table holds, for the memory it costs (status, tests).
  size_t entries() const { return running_.size() + requeued_.size() + suspects_.size() + held_.size(); }

 private:
  struct Run {
    uint64_t end;
    WorkerId worker;
  };
  // The one transition function: `r` leaves `from` (where all of it must be; for kRunning on
  // `worker`) for `to`. Queued ranges leave from the front (take): their removal is done by the
  // caller, which picked them. Legal: queued/suspect -> running, running -> done/held/queued/suspect,
  // held -> done.
  void move(ChunkRange r, ChunkState from, ChunkState to, WorkerId worker);
  void add_running(ChunkRange r, WorkerId worker);
  void remove_running(ChunkRange r);
  void remove_held(ChunkRange r);

  uint64_t chunks_;
  uint64_t next_fresh_ = 0;  // chunks at or after it are queued and were never handed out
  RangeFifo requeued_;
  uint64_t requeued_count_ = 0;  // chunks in requeued_
  RangeFifo suspects_;
  uint64_t suspect_count_ = 0;  // chunks in suspects_
  std::map<uint64_t, Run> running_;  // by first chunk; a worker's adjacent runs are one entry
  uint64_t running_count_ = 0;
  std::map<uint64_t, uint64_t> held_;  // first chunk -> end, as held (a block's pieces)
  uint64_t held_count_ = 0;
  uint64_t done_ = 0;
  uint64_t requeued_total_ = 0;
  uint64_t given_back_total_ = 0;
};

}  // namespace psched
