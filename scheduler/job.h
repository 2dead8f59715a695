// Job: one submitted array-sum job inside psched, cut into chunks that travel as ranges. Where each
// chunk stands (queued -> running -> done, running -> queued on worker loss or failure) is the
// job's RangeTable (scheduler/range_table.h), whose one transition function makes every change. A
// range's partial (one per run of chunks a worker finished) is merged into the job's one exact
// total when its chunks become done (a late duplicate is not running, so it is ignored); exact
// merging is order-free, so the result never depends on which worker ran what, how the runs were
// cut or in which order results came back, and the job keeps no per-chunk partials.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/job_spec.h"
#include "core/partial.h"
#include "scheduler/ids.h"
#include "scheduler/range_table.h"
#include "scheduler/verify.h"

namespace psched {

// A chunk's partial but its exact sum: what Job::finish_adding() takes beside it.
struct ChunkFigures {
  double sum;
  uint64_t count;
  double min, max;
};

class Job {
 public:
  Job(JobId id, ClientId client, std::shared_ptr<const JobSpec> spec, bool want_partials);

  // A Job is ~1.2 KB, past the allocator's small sizes: each new one made glibc consolidate its
  // free lists (3% of psched's instructions with 10,000 small jobs at once). Freed Jobs' memory is
  // kept for the next ones, up to kRecycled per thread.
  static void* operator new(size_t bytes);
  static void operator delete(void* p, size_t bytes);
  static constexpr size_t kRecycled = 256;

  JobId id() const { return id_; }
  ClientId client() const { return client_; }
  const std::shared_ptr<const JobSpec>& spec() const { return spec_; }
  bool want_partials() const { return want_partials_; }
  // Where workers cut the partials they report (DefineJob.partialBlock): at every chunk for
  // streamed partials, at every verify block for verify (which compares blocks), nowhere (0: a
  // partial per run) otherwise.
  uint64_t partial_block() const { return verify.on() ? verify.block_chunks() : want_partials_ ? 1 : 0; }
  const RangeTable& ranges() const { return table_; }
  uint64_t chunks() const { return table_.chunks(); }
  uint64_t done() const { return table_.done(); }
  bool complete() const { return table_.complete(); }
  // Queued chunks: fresh, re-queued, and suspects (below), which go out only alone.
  bool has_queued() const { return has_ordinary() || has_suspects(); }
  // Queued chunks that may share a worker's window with others.
  bool has_ordinary() const { return table_.has_ordinary(); }
  bool has_suspects() const { return table_.has_suspects(); }
  bool has_fresh() const { return table_.has_fresh(); }
  // The workers the next re-queued range's first chunk failed on or took down (null when no range
  // is re-queued, or it never failed): a retry goes to another worker while one is connected
  // (top_up.cpp: a path missing on one node must not fail the job there again).
  const std::vector<std::string>* next_retry_failed_on() const;
  // Chunks or verify copies waiting for a worker (the scheduler's WorkQueue holds the jobs with work).
  bool has_work() const { return has_queued() || verify.has_queued(); }
  uint64_t queued() const { return table_.queued(); }
  uint64_t retries() const { return table_.requeued_total(); }
  double running_sum() const { return running_sum_; }
  double seconds() const;
  ChunkState state(uint64_t chunk) const { return table_.state(chunk); }
  std::optional<WorkerId> running_on(uint64_t chunk) const { return table_.running_on(chunk); }
  size_t workers_used() const { return done_by_.size(); }
  // Chunks each worker finished (the one credited with a verified chunk: its first copy's).
  const std::map<WorkerId, uint64_t>& done_by() const { return done_by_; }

  // Takes the next run of at most `max` queued chunks (re-queued ones first, then fresh ones in
  // index order) and marks it running on `worker`; returns the run's length (>= 1), its first
  // chunk in `first`. A verify job's runs end on a block's end (RangeTable::take's `align`), even
  // past `max`. Requires has_ordinary(). With `fresh_only`, re-queued chunks are left for another
  // worker (requires has_fresh()).
  uint64_t take_run(WorkerId worker, uint64_t max, uint64_t& first, bool fresh_only = false);
  // A suspect, marked running on `worker`, which must hold nothing else while it runs it (so that
  // if the worker dies, the suspect is the one to blame): the next chunk of the oldest suspect
  // range, or all of it when it is longer than kSuspectsOneByOne. Requires has_suspects().
  ChunkRange take_suspect(WorkerId worker);
  std::vector<ChunkRange> running_ranges_of(WorkerId worker) const { return table_.running_of(worker); }
  // Running chunks finished with `partial` (the merged partial of all of `r`); returns false (and
  // changes nothing) unless all of `r` is running on `worker`.
  bool finish(ChunkRange r, WorkerId worker, const PartialSum& partial);
  bool finish(uint64_t chunk, WorkerId worker, const PartialSum& partial) {
    return finish(ChunkRange{chunk, 1}, worker, partial);
  }
  // finish() for a partial whose exact sum is still in its message (the common case: no verify
  // draw, no streamed partials): add_exact(ExactSum& total) adds that exact sum into the job's
  // total with at most `exact_adds` adds of single doubles, so no 556-byte accumulator is built.
  template <typename AddExact>
  bool finish_adding(ChunkRange r, WorkerId worker, const ChunkFigures& figures, uint64_t exact_adds,
                     AddExact&& add_exact) {
    if (!table_.finish(r, worker)) return false;
    make_room(exact_adds);
    add_exact(total_.exact);
    record_figures(r, worker, figures);
    return true;
  }
  // Verify: running chunks' first copy is in and `verify` holds it; returns false unless all of `r`
  // is running on `worker`. finish_verified() completes a block with the partial that
  // verification settled on, credited to `worker` (the first copy's).
  bool hold_for_verify(ChunkRange r, WorkerId worker) { return table_.hold(r, worker); }
  void finish_verified(ChunkRange block, WorkerId worker, const PartialSum& partial);
  // Running chunks go back to the queue: their worker left (blame = false), or died or failed them
  // (blame = true, counted against each chunk, naming `worker_name`). With `repeat_as_suspect`, the
  // blamed chunks that had failed before go back as a suspect range: their worker died while it
  // held other chunks too, so any of them may have killed it. Suspects run alone on a worker
  // (take_suspect): one by one, so innocent neighbours complete and only the chunk that crashes
  // workers keeps collecting failures, and the job's failure names it; a range too long to run
  // chunk by chunk runs whole and, lost again, is halved (requeue_halves) until its pieces are
  // short enough. Ranges of chunks whose failures reach `limit` are appended to `at_limit`.
  // Returns false (and changes nothing) unless all of `r` is running on `worker`.
  bool requeue(ChunkRange r, WorkerId worker, const std::string& worker_name, bool blame,
               bool repeat_as_suspect = false, uint32_t limit = UINT32_MAX,
               std::vector<ChunkRange>* at_limit = nullptr);
  // One chunk back to the queue; returns how many times it has now failed.
  uint32_t requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name, bool blame,
                   bool repeat_as_suspect = false);
  // Chunks of a worker that was lost (Scheduler::requeue_lost): blamed and named with what happened
  // to it (`what`), but held to `limit` only when the worker ran nothing else (`alone`: the crash is
  // shown; a worker killed from outside with a window of chunks proves nothing about any of them).
  // Chunks that failed before go back as a suspect range, to run alone. Ranges at the limit are
  // appended to `at_limit`. False (nothing changes) unless all of `r` is running on `worker`.
  bool requeue_lost(ChunkRange r, WorkerId worker, const std::string& worker_name, const std::string& what,
                    bool alone, uint32_t limit, std::vector<ChunkRange>& at_limit);
  // A suspect range of more than one chunk that took its worker down alone: blamed (the failure
  // will name every worker the culprit took down) but not held to the failure limit, since the
  // search is not over, and back as two suspect halves. False unless all of `r` runs on `worker`.
  bool requeue_halves(ChunkRange r, WorkerId worker, const std::string& worker_name);
  // Running chunks the worker gave back unstarted (scheduler/give_back.h): queued, no blame, no
  // retry. False (nothing changes) unless all of `r` is running on `worker`.
  bool give_back(ChunkRange r, WorkerId worker) { return table_.give_back(r, worker); }
  // Suspect ranges up to this long run chunk by chunk: the plain window's bound (kMaxWindowChunks),
  // so a shallow window lost twice is searched as it always was, at one crash; only a GPU's deeper
  // timed window (up to kMaxTimedWindowChunks = 2^22) is halved first, at most 6 more crashes,
  // instead of millions of lone runs.
  static constexpr uint64_t kSuspectsOneByOne = uint64_t{1} << 16;
  // The workers a chunk failed on or took down, in order (empty when none), and how many of those
  // failures count against the failure limit (all but a halved suspect range's crashes).
  const std::vector<std::string>& failed_on(uint64_t chunk) const;
  uint32_t failures(uint64_t chunk) const;
  // The workers `chunk` (copy: its verify copy) failed on, each name once, in first-seen order,
  // with how often when more than once (a restarted worker keeps its name): "a x2, b".
  std::vector<std::string> failure_names(uint64_t chunk, bool copy) const;
  // What happened to each worker a chunk took down while running alone, "name (what)", in order.
  const std::vector<std::string>& shown_failures(uint64_t chunk) const;

  // The merged partials of the done chunks, the exact total as its terms (`sum`, the first, is it
  // rounded): normalised and split once for the JobResult and the job's summary alike.
  CompactPartial result() const;

  // Progress throttling and streaming bookkeeping: with want_partials, each chunk's partial waits
  // here (chunk, partial) until the next Progress carries it.
  std::chrono::steady_clock::time_point last_progress{};
  std::vector<std::pair<uint64_t, PartialSum>> unsent_partials;
  // What the client should hear about its job (a worker holding its chunks stalled, thrown off,
  // lost or gone), said once with the next Progress (Progress.notices).
  std::vector<std::string> notices;
  // Notices about single workers kept until the next Progress: a fleet lost at once (thousands
  // of simulated workers) must not make one Progress of megabytes; the first ones name the cause.
  static constexpr size_t kMaxWorkerNotices = 64;
  // Submit.verifyFraction's state: its own structure (scheduler/verify.h), off by default.
  BlockVerifier verify;

 private:
  // The one place a partial joins the job, once the table has marked its chunks done: record()
  // merges its exact sum, record_figures() the rest (count, min, max, the running sum, the worker's
  // share).
  void record(ChunkRange r, WorkerId worker, const PartialSum& partial);
  void record_figures(ChunkRange r, WorkerId worker, const ChunkFigures& f);
  // Normalises total_.exact first if `adds` more adds of single doubles could take a digit out of
  // int64: every add puts less than 2^32 into a digit, and the budget is 2^30 adds.
  void make_room(uint64_t adds);

  JobId id_;
  ClientId client_;
  std::shared_ptr<const JobSpec> spec_;
  bool want_partials_;
  std::chrono::steady_clock::time_point started_;
  RangeTable table_;
  PartialSum total_;  // exact sum, count, min, max of the done chunks
  static constexpr uint64_t kAddsBeforeNormalize = uint64_t{1} << 30;
  uint64_t adds_since_normalize_ = 0;  // total_.exact's adds (or their equivalent) since normalised
  double running_sum_ = 0;
  // Chunks that failed, as ranges alike (the same workers, in order), by first chunk; never
  // overlapping. A dead worker's window is one entry, not one per chunk. `counted`: the failures
  // held to the limit (not the crashes of a halved suspect range: requeue_halves).
  struct Blame {
    uint64_t end;
    std::vector<std::string> names;
    uint32_t counted = 0;
    std::vector<std::string> shown;  // requeue_lost's counted losses: "name (what)"
  };
  std::map<uint64_t, Blame> failures_;
  const Blame* blame_of(uint64_t chunk) const;  // null when it never failed
  void split_failures_at(uint64_t chunk);  // an entry starts at `chunk` if one covers it
  void add_blame(ChunkRange r, const std::string& worker_name, bool counted, const std::string& shown = {});
  // requeue() and requeue_lost(): stretches alike go back together, then `r` is blamed.
  void requeue_blamed(ChunkRange r, WorkerId worker, const std::string& worker_name, bool counted,
                      bool repeat_as_suspect, const std::string& shown, uint32_t limit, std::vector<ChunkRange>* at_limit);
  // Whether `chunk` lies in a failed range, and where that stretch (or the unfailed gap) ends.
  bool failed_before(uint64_t chunk, uint64_t& stretch_end) const;
  std::map<WorkerId, uint64_t> done_by_;
};

}  // namespace psched
