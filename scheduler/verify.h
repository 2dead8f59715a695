// BlockVerifier: a job's verify state (Submit.verifyFraction; docs/design.md, "Verify"). Verify
// works on blocks, aligned runs of block_chunks() chunks that workers report as one partial each
// (DefineJob.partialBlock), so it costs per block, not per chunk. A drawn block is computed again
// on a different worker once its first copy is whole, and the copies are compared with
// same_bits() (core/partial.h); on a mismatch a third worker, where there is one, breaks the tie.
// Then the block is narrowed down to the chunk (BlockSearch, scheduler/verify_search.h, decides
// the steps; this queues them), so the mismatch names the chunk and the worker. Only blocks
// awaiting a copy hold anything here, so the state stays as small as the copies in flight. The Job
// holds the block's chunks (ChunkState::kHeld) meanwhile; the scheduler (results.cpp,
// job_lifecycle.cpp, top_up.cpp, job_verify.cpp) moves the copies between this and the workers.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/partial.h"
#include "scheduler/ids.h"
#include "scheduler/range_table.h"
#include "scheduler/verify_search.h"

namespace psched {

// Most mismatches a JobResult lists (all are counted): a device wrong on every chunk of a 2^24-chunk
// job must not make a JobResult outgrow a frame (each listed mismatch is ~300 bytes on the wire).
inline constexpr size_t kMaxReportedMismatches = 1000;

// A verify block holds at least this many elements (10000^2 chunks go 16 to a block, 1000^2 chunks
// 2048), so that verify costs psched a few partials per 2^30 elements (0.007 s of an H100), not one
// per chunk: with a block per 10000^2 chunk, psched's ~25 us per block bounded a fleet
// (bench/README.md, "Figures once in code comments"). But a job has at least kVerifyMinBlocks
// blocks, so that a fraction draws a fair sample. Narrowing a mismatch down recomputes about two
// blocks' worth, in log2(block) rounds.
inline constexpr uint64_t kVerifyBlockElements = uint64_t{1} << 30;
inline constexpr uint64_t kVerifyMinBlocks = 64;
// Chunks per verify block of a job of `chunks` chunks of `chunk_elements` elements: a power of two.
uint64_t verify_block_chunks(uint64_t chunks, uint64_t chunk_elements);

// Whether block `block` (chunk index / block_chunks) is drawn for verification: a hash of (seed,
// block) against `fraction`, so the same job spec draws the same blocks every time. fraction >= 1
// draws every block, <= 0 none.
bool verify_drawn(uint64_t seed, uint64_t block, double fraction);

// Chunks whose copies differ: a block, or, once narrowed down, one chunk.
struct VerifyMismatch {
  ChunkRange chunks;
  std::vector<VerifyCopy> copies;  // each copy's partial over `chunks`, in the order computed
  VerifySearch search = VerifySearch::kFound;
};

// A block the copies settled: its chunks are done with `keep` (credited to `credit`, the first
// copy's worker); `mismatch` is set when its copies differed.
struct VerifySettled {
  ChunkRange block;
  PartialSum keep;
  WorkerId credit = 0;
  const VerifyMismatch* mismatch = nullptr;
};

class BlockVerifier {
 public:
  BlockVerifier() = default;
  BlockVerifier(double fraction, uint64_t seed, uint64_t chunks, uint64_t block_chunks);

  bool on() const { return fraction_ > 0; }
  double fraction() const { return fraction_; }
  uint64_t block_chunks() const { return block_; }
  ChunkRange block_of(uint64_t chunk) const;
  bool drawn(uint64_t chunk) const { return on() && verify_drawn(seed_, chunk / block_, fraction_); }

  // A piece of a drawn block's first copy is in: `range` (inside one block) with `copy`'s partial.
  // Once the block's first copy is whole, its second copy is queued.
  void first_piece(ChunkRange range, VerifyCopy copy);

  bool has_queued() const { return queued_ > 0; }
  uint64_t queued() const { return queued_; }  // chunks of queued copies
  // Takes queued copies `worker` may run, whole, up to `max` chunks (at least one if any), marking
  // them running on it, into `out` (appended, in queue order). A block's copy goes to a worker
  // that computed none of its copies yet, or to one that did when no other worker is connected
  // (one worker: it computes the block twice); a narrowing step's pair goes one to the odd copy's
  // worker, one to another.
  uint64_t take(WorkerId worker, uint64_t max, const VerifyPeers& peers, std::vector<ChunkRange>& out);
  // Whether all of `r` lies in a copy running on `worker` (a result for it is that copy's).
  bool running_here(ChunkRange r, WorkerId worker) const;
  // The ranges of copies running on `worker`, whole (the chunks already in included).
  std::vector<ChunkRange> running_of(WorkerId worker) const;
  // Chunks of copies running on `worker` that are not in yet (neither a piece nor a failure): what
  // its window holds for them.
  uint64_t awaited_from(WorkerId worker) const;

  // A piece of a running copy came back. Returns the block when this settled it.
  std::optional<VerifySettled> piece_done(ChunkRange r, VerifyCopy copy, const VerifyPeers& peers);
  // A chunk of a copy running on `worker` failed there (blamed, naming `worker_name`); the copy
  // runs again once its other chunks are in. Returns how many times the block's copies failed;
  // `settled` is set when the block settled (a narrowing step failed, which ends the search).
  uint32_t chunk_failed(uint64_t chunk, WorkerId worker, const std::string& worker_name,
                        const VerifyPeers& peers, std::optional<VerifySettled>& settled);
  // `worker` left (blame: it died or was cut off, naming it; `peers` no longer has it): its running
  // copies go back to the queue, and a search that needed it (the odd copy's worker, or the last
  // other one) ends. A loss counts against `limit` only when `counted` (the worker ran that copy
  // alone: a crash it shows); losses beside other work are named, and only past kLostBeside x
  // `limit` of them does the block give up. Blocks at the limit are appended to `at_limit`, blocks
  // this settled to `settled`.
  static constexpr uint32_t kLostBeside = 4;
  void worker_gone(WorkerId worker, const std::string& worker_name, bool blame, bool counted, uint32_t limit,
                   const VerifyPeers& peers, std::vector<ChunkRange>& at_limit,
                   std::vector<VerifySettled>& settled);
  // The workers copies of `chunk`'s block failed on or were lost with (empty when none, or the
  // block is settled), and how many of those failures were shown and count against the limit
  // (as Job::failures for a chunk).
  const std::vector<std::string>& failed_on(uint64_t chunk) const;
  uint32_t failures(uint64_t chunk) const;

  uint64_t verified() const { return verified_; }  // chunks settled
  uint64_t same_worker() const { return same_worker_; }
  uint64_t mismatch_count() const { return mismatch_count_; }
  const std::vector<VerifyMismatch>& mismatches() const { return mismatches_; }  // the first ones
  uint64_t holding() const { return held_.size(); }  // blocks awaiting a copy

 private:
  // A copy of a range as it comes in, in pieces.
  struct Copy {
    std::vector<VerifyCopy> pieces;
    std::vector<ChunkRange> ranges;  // each piece's
    uint64_t chunks = 0;             // in so far (failed ones included)
    PartialSum partial;              // the pieces merged
    bool failed = false;
    void add(ChunkRange r, VerifyCopy piece);
    VerifyCopy whole() const;  // the pieces as one copy: merged partial, names joined
  };
  // What a copy computes: the block again, or a narrowing step's range on the odd copy's worker
  // (kSuspect, pinned to it) or on another (kOther).
  enum class Kind : uint8_t { kBlock, kSuspect, kOther };
  // A copy is queued, then runs on one worker, then is done (and leaves the block's list); a
  // queued one may be dropped (the search ended), a running one sent back to the queue (its
  // worker left) or dropped (its worker left once the block no longer needs it). move_task() is
  // the one place a task's state changes.
  enum class State : uint8_t { kNew, kQueued, kRunning, kDone };
  struct Task {
    Kind kind;
    ChunkRange range;
    WorkerId pinned = 0;  // kSuspect: the odd copy's worker, the only one that may run it
    State state = State::kNew;
    WorkerId worker = 0;  // running on it
    Copy got;
  };
  using Tasks = std::list<Task>;
  // A block's life; move() is the one place it changes, and checks what each phase implies:
  //   kFirstCopy -> kCopies     its first copy is whole: the second is queued (a third on a tie)
  //   kCopies -> kNarrowing     the copies differ: the search for the chunk begins
  //   kCopies -> kDecided       the copies agree, or differ with nothing to search
  //   kNarrowing -> kDecided    the search found the chunk or stopped (VerifyMismatch::search says
  //                             why); its queued steps are dropped
  //   kDecided -> kSettled      no step of it runs any more: the block leaves held_
  // Only kCopies and kNarrowing have queued tasks, and a block is in queue_ exactly while it has
  // one (HeldBlock::listed), so a settled block is never in it.
  enum class Phase : uint8_t { kFirstCopy, kCopies, kNarrowing, kDecided, kSettled };
  struct HeldBlock {
    ChunkRange block;
    Phase phase = Phase::kFirstCopy;
    std::optional<std::list<uint64_t>::iterator> listed;  // its place in queue_
    Copy first;                       // the first copy, as its pieces come in
    std::vector<VerifyCopy> copies;   // whole copies, in the order computed
    Tasks tasks;                      // copies queued or running
    std::vector<std::string> failed_on;
    uint32_t shown = 0;  // failures in failed_on held to the limit: reported, or lost alone
    // Once the copies decide: what the job keeps, and the mismatch being narrowed down (by
    // `search`, exactly while kNarrowing).
    PartialSum keep;
    std::optional<VerifyMismatch> mismatch;
    std::optional<BlockSearch> search;
  };

  void move(HeldBlock& p, Phase to);
  Tasks::iterator move_task(HeldBlock& p, Tasks::iterator t, State to, WorkerId worker = 0, bool front = false);
  void queue(HeldBlock& p, Kind kind, ChunkRange range, WorkerId pinned, bool front);
  bool may_take(const HeldBlock& p, const Task& t, WorkerId worker, const VerifyPeers& peers) const;
  static Tasks::const_iterator running_task(const HeldBlock& p, ChunkRange r, WorkerId worker);
  template <typename TakeIn>
  std::optional<VerifySettled> account(ChunkRange r, WorkerId worker, const VerifyPeers& peers, TakeIn&& in);
  // Does what the block's search asks next: queues its steps, or ends it.
  void follow(HeldBlock& p, BlockSearch::Next next);
  // The search stops where it got: its queued steps are dropped, and the block is decided.
  void end_search(HeldBlock& p, VerifySearch why);
  // A task's chunks are all in: what it means for the block.
  void task_done(HeldBlock& p, const Task& task, const VerifyPeers& peers);
  void decide(HeldBlock& p, const VerifyPeers& peers);
  // Settles the block if it is decided and nothing of it runs any more (it then leaves held_).
  std::optional<VerifySettled> settle_if_idle(uint64_t block);
  static std::vector<WorkerId> workers_of(const HeldBlock& p);
  static bool computed_by(const HeldBlock& p, WorkerId worker);  // workers_of(p) has it, unallocated
  template <typename F>
  static bool any_worker(const HeldBlock& p, F&& f);

  double fraction_ = 0;
  uint64_t seed_ = 0, chunks_ = 0, block_ = 1;
  std::map<uint64_t, HeldBlock> held_;  // by block index: blocks awaiting a copy, the only ones held
  std::list<uint64_t> queue_;            // blocks with a queued copy, in the order they go out
  uint64_t queued_ = 0;
  uint64_t verified_ = 0, same_worker_ = 0, mismatch_count_ = 0;
  std::vector<VerifyMismatch> mismatches_;
  VerifyMismatch last_mismatch_;  // the one a settled block reports when the list is full
};

}  // namespace psched
