// Job: one submitted array-sum job inside psched, cut into chunk tasks. Each chunk's lifecycle is an
// explicit state machine (queued -> running -> done, running -> queued on worker loss or failure)
// and transition() is the only code that changes a chunk's state. A chunk's partial is merged into
// the job's one exact total when the chunk first becomes done (a late duplicate is not running, so
// it is ignored); exact merging is order-free, so the result never depends on which worker ran
// what or in which order results came back, and the job keeps no per-chunk partials.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/job_spec.h"
#include "common/partial.h"
#include "scheduler/ids.h"
#include "scheduler/verify.h"

namespace psched {

// kVerifying: the chunk's first copy is in and held by the job's ChunkVerifier (scheduler/verify.h)
// until another worker's copy agrees or a majority is found; only then is it done.
enum class TaskState : uint8_t { kQueued, kRunning, kVerifying, kDone };

// A chunk's partial but its exact sum: what Job::finish_adding() takes beside it.
struct ChunkFigures {
  double sum;
  uint64_t count;
  double min, max;
};

class Job {
 public:
  Job(JobId id, ClientId client, std::shared_ptr<const JobSpec> spec, bool want_partials);

  JobId id() const { return id_; }
  ClientId client() const { return client_; }
  const std::shared_ptr<const JobSpec>& spec() const { return spec_; }
  bool want_partials() const { return want_partials_; }
  uint64_t chunks() const { return states_.size(); }
  uint64_t done() const { return done_; }
  bool complete() const { return done_ == states_.size(); }
  // Queued chunks: fresh, re-queued, and suspects (below), which go out only alone.
  bool has_queued() const { return has_ordinary() || !suspects_.empty(); }
  // Queued chunks that may share a worker's window with others.
  bool has_ordinary() const { return !requeued_.empty() || next_fresh_ < states_.size(); }
  bool has_suspects() const { return !suspects_.empty(); }
  // Chunks or verify copies waiting for a worker (Scheduler::queued_jobs_ holds the jobs with work).
  bool has_work() const { return has_queued() || verify.has_queued(); }
  uint64_t queued() const {
    return requeued_.size() + suspects_.size() + (states_.size() - next_fresh_);
  }
  uint64_t retries() const { return retries_; }
  double running_sum() const { return running_sum_; }
  double seconds() const;
  TaskState state(uint64_t chunk) const { return TaskState(states_[chunk]); }
  WorkerId running_on(uint64_t chunk) const { return running_on_[chunk]; }
  size_t workers_used() const { return workers_used_.size(); }

  // Takes the next chunk to run (requeued chunks first, then fresh ones in index order) and marks
  // it running on `worker`. Requires has_ordinary().
  uint64_t take(WorkerId worker);
  // As up to `max` take()s that yield consecutive chunks: a requeued chunk alone, or a run of fresh
  // ones. Returns the run's length (>= 1); its first chunk goes to `first`. Requires has_ordinary().
  uint64_t take_run(WorkerId worker, uint64_t max, uint64_t& first);
  // The oldest suspect, marked running on `worker`, which must hold nothing else while it runs it
  // (so that if the worker dies, the chunk is the one to blame). Requires has_suspects().
  uint64_t take_suspect(WorkerId worker);
  // The chunks running on `worker` (a scan of the job: used when a worker leaves).
  std::vector<uint64_t> running_chunks_of(WorkerId worker) const;
  // Running chunk finished with `partial`; returns false (and changes nothing) unless the chunk is
  // running on `worker`.
  bool finish(uint64_t chunk, WorkerId worker, const PartialSum& partial);
  // finish() for a partial whose exact sum is still in its message (the common case: no verify
  // draw, no streamed partials): add_exact(ExactSum& total) adds that exact sum into the job's
  // total with at most `exact_adds` adds of single doubles, so the chunk's own 556-byte
  // accumulator is never built.
  template <typename AddExact>
  bool finish_adding(uint64_t chunk, WorkerId worker, const ChunkFigures& figures,
                     uint64_t exact_adds, AddExact&& add_exact) {
    if (!running_here(chunk, worker)) return false;
    make_room(exact_adds);
    add_exact(total_.exact);
    record_figures(chunk, worker, figures);
    return true;
  }
  // Verify: a running chunk's first copy is in and `verify` holds it (kVerifying); returns false
  // unless the chunk is running on `worker`. finish_verified() completes it with the partial that
  // verification settled on, credited to `worker` (the first copy's).
  bool hold_for_verify(uint64_t chunk, WorkerId worker);
  void finish_verified(uint64_t chunk, WorkerId worker, const PartialSum& partial);
  // Running chunk goes back to the queue: its worker left (blame = false), or died or failed it
  // (blame = true, counted against the chunk). Returns how many times the chunk has now failed.
  // With `suspect`, it goes back as a suspect: its worker died while it held other chunks too, so
  // any of them may have killed it. A suspect runs alone on a worker (take_suspect), so that only
  // the chunk that crashes workers keeps collecting failures, and the job's failure names it, not
  // a neighbour that shared its window.
  uint32_t requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name, bool blame,
                   bool suspect = false);
  const std::vector<std::string>& failed_on(uint64_t chunk) const;

  // The merged partials of the done chunks, `sum` rounded from the exact total.
  PartialSum result() const;

  // Progress throttling and streaming bookkeeping: with want_partials, each chunk's partial waits
  // here (chunk, partial) until the next Progress carries it.
  std::chrono::steady_clock::time_point last_progress{};
  std::vector<std::pair<uint64_t, PartialSum>> unsent_partials;
  // Submit.verifyFraction's state: its own structure (scheduler/verify.h), off by default.
  ChunkVerifier verify;

 private:
  void transition(uint64_t chunk, TaskState to, WorkerId worker);
  bool running_here(uint64_t chunk, WorkerId worker) const {
    return chunk < states_.size() && TaskState(states_[chunk]) == TaskState::kRunning &&
           running_on_[chunk] == worker;
  }
  // The one place a chunk's partial joins the job: record() merges its exact sum, record_figures()
  // the rest (count, min, max, the running sum) and marks the chunk done.
  void record(uint64_t chunk, WorkerId worker, const PartialSum& partial);
  void record_figures(uint64_t chunk, WorkerId worker, const ChunkFigures& f);
  // Normalises total_.exact first if `adds` more adds of single doubles could take a digit out of
  // int64: every add puts less than 2^32 into a digit, and the budget is 2^30 adds.
  void make_room(uint64_t adds);

  JobId id_;
  ClientId client_;
  std::shared_ptr<const JobSpec> spec_;
  bool want_partials_;
  std::chrono::steady_clock::time_point started_;
  std::vector<uint8_t> states_;
  std::vector<WorkerId> running_on_;
  PartialSum total_;  // exact sum, count, min, max of the done chunks
  static constexpr uint64_t kAddsBeforeNormalize = uint64_t{1} << 30;
  uint64_t adds_since_normalize_ = 0;  // total_.exact's adds (or their equivalent) since normalised
  std::deque<uint64_t> requeued_;
  std::deque<uint64_t> suspects_;  // requeued chunks that go out alone (requeue(..., suspect))
  uint64_t next_fresh_ = 0;
  uint64_t done_ = 0;
  uint64_t retries_ = 0;
  double running_sum_ = 0;
  std::map<uint64_t, std::vector<std::string>> failures_;  // sparse: only chunks that failed
  std::map<WorkerId, bool> workers_used_;
};

}  // namespace psched
