// BlockSearch: the bisection that narrows a verify block whose copies differ down to the chunk that
// differs (docs/design.md, "Narrowing down"). It decides and BlockVerifier (scheduler/verify.h)
// acts: the verifier queues the steps a search asks for, hands each step's copy back, and ends the
// block's search when the search says so. Also here, as the search needs them and verify.h includes
// this: a copy (VerifyCopy), how a search ended (VerifySearch) and what both ask about the
// scheduler's workers (VerifyPeers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/partial.h"
#include "scheduler/ids.h"
#include "scheduler/range_table.h"

namespace psched {

// One copy of a range: who computed it, on what, and what it got. A block's first copy may come in
// pieces from several workers; `worker` is then the first one's and the names are joined.
struct VerifyCopy {
  WorkerId worker = 0;
  std::string worker_name, device_name;
  PartialSum partial;
  bool suspect = false;  // the odd one out, or one of copies that disagree with no majority
};

// How the search for the odd chunk of a mismatched block ended: found, or why it stopped short
// (the mismatch then names the smallest range known to differ).
enum class VerifySearch : uint8_t {
  kFound,           // narrowed down to one chunk (or the block was one chunk)
  kNoMajority,      // three copies that all differ: no odd copy to search
  kOddWorkerLeft,   // the odd copy's worker left, so its copy cannot be computed again
  kNoOtherWorker,   // no worker but the odd copy's was connected to compare with
  kStepFailed,      // a step of the search failed on its worker
  kNotReproduced,   // computed again, the odd copy's worker agreed (not deterministic?)
};
// The reason in words, for logs and pbench ("" for kFound).
const char* verify_search_note(VerifySearch search);

// What the verifier asks about the scheduler's workers.
class VerifyPeers {
 public:
  virtual bool someone_else(const std::vector<WorkerId>& excluded) const = 0;  // a connected one outside
  virtual bool connected(WorkerId worker) const = 0;

 protected:
  ~VerifyPeers() = default;
};

// The search in one block. Each piece of the odd copy (its pieces from several workers when the odd
// copy is the first; else the whole block) is checked against another worker's partial of that
// piece (for the whole block the other copies' partial is known, so nothing is computed), and the
// first piece that differs is halved until one chunk is left: its left half is computed again on
// the odd copy's worker and on another, and the search goes on in the half that differs (the sums
// are exact, so if the left halves agree the right ones differ). A search needs the odd copy's
// worker and another; without them it stops where it got.
class BlockSearch {
 public:
  // A step: `range` computed on the odd copy's worker (`on_suspect`: pinned to it) or on another.
  struct Step {
    ChunkRange range;
    bool on_suspect = false;
  };
  // The chunk found, with the odd worker's partial of it and the other worker's.
  struct Found {
    ChunkRange chunk;
    VerifyCopy odd, other;
  };
  // What the verifier does next: queue `steps`, in order, ahead of other copies; or, once `ended`,
  // end the search (`found` is set when it ended on one chunk whose other copy came from a worker).
  // Neither: a step is still running.
  struct Next {
    std::vector<Step> steps;
    std::optional<VerifySearch> ended;
    std::optional<Found> found;
  };

  // `pieces`: the odd copy's pieces, each with its range, searched last first; `reference`: the
  // other copies' partial of the whole block; `majority`: whether the other copies agreed (else the
  // other worker of a chunk found is a suspect too).
  BlockSearch(ChunkRange block, PartialSum reference, bool majority,
              std::vector<std::pair<ChunkRange, VerifyCopy>> pieces);

  // A search's life; move() is the one place it changes, and checks what each phase implies:
  //   kNew -> kChecking        start(): the last piece of a first copy in pieces is asked of
  //                            another worker (the odd worker's partial of it is known)
  //   kNew -> kHalving         start(): the whole block differs, its left half is asked of both
  //   kChecking -> kChecking   the piece agrees: the next piece is checked
  //   kChecking -> kHalving    the piece differs: its left half is asked of both
  //   kHalving -> kHalving     both copies of the half are in: the half that differs is halved
  //   kHalving -> kChecking    the odd worker agreed on the one chunk left: the next piece
  //   any but kEnded -> kEnded found, or stopped (no piece left, a worker left, no other one)
  // kChecking waits for one step (not on the suspect), kHalving for a pair; kEnded asks nothing.
  enum class Phase : uint8_t { kNew, kChecking, kHalving, kEnded };
  Phase phase() const { return phase_; }

  Next start(const VerifyPeers& peers);
  // A step came back whole (not failed) with `got`.
  Next step_done(bool on_suspect, VerifyCopy got, const VerifyPeers& peers);
  // A worker left (`peers` no longer has it): why the search must stop, if it must.
  std::optional<VerifySearch> stops_without(WorkerId gone, const VerifyPeers& peers) const;
  WorkerId suspect() const;  // the odd copy's worker: a step not on_suspect may run anywhere else

 private:
  // The search inside `range` (known or, while kChecking, suspected to differ) where `suspect`'s
  // copy differs from another worker's; `asked` is what its running step computes (kChecking: only
  // the other worker computes `range`, the suspect's partial of it is known).
  struct Probe {
    ChunkRange range, asked;
    VerifyCopy suspect;  // partial over `range` when known
    std::optional<VerifyCopy> suspect_got, other_got;
  };

  void move(Phase to);
  Next next_probe(const VerifyPeers& peers);
  Next probe_step(const VerifyPeers& peers);
  Next ask(ChunkRange range, const VerifyPeers& peers);
  Next end_search(VerifySearch why);

  ChunkRange block_;
  PartialSum reference_;
  bool majority_ = false;
  std::vector<std::pair<ChunkRange, VerifyCopy>> to_check_;  // the odd copy's pieces left to search
  std::optional<Probe> probe_;
  Phase phase_ = Phase::kNew;
};

}  // namespace psched
