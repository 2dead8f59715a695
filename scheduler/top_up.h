// Top-up: the policy of dispatch, apart from the sending (dispatch.cpp sends what it plans). A
// worker's window is filled from the jobs that have work, in turn: each job takes its share of the
// free window as runs of consecutive chunks, all of them together at most one budget, the worker's
// part of all the work queued (plan_top_up).
// Planning takes the chunks (they run on the worker from then on) and fills the worker's window;
// it builds no message and needs no socket or clock (tests/scheduler/top_up_test.cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "scheduler/job.h"
#include "scheduler/peers.h"
#include "scheduler/window_depth.h"

namespace psched {

using JobTable = std::map<JobId, std::unique_ptr<Job>>;

// The jobs with work waiting for a worker (queued chunks or verify copies, Job::has_work()), in id
// order, whose turn comes next, and how much work waits over all of them. Dispatch walks these, not
// every job (with 10,000 small jobs mostly running, walking them all on every Submit and result was
// psched's whole CPU). update() is the one place a job joins or leaves: call it after anything that
// may change the job's work.
class WorkQueue {
 public:
  // A job with work, and the elements of its queued chunks and verify copies. The job is held by
  // the scheduler's JobTable, and leaves the queue (forget) before it is destroyed.
  struct Entry {
    Job* job;
    uint64_t elements;
  };
  void update(Job& job);
  void forget(JobId id);
  bool empty() const { return jobs_.empty(); }
  size_t size() const { return jobs_.size(); }
  bool contains(JobId id) const { return jobs_.count(id) > 0; }
  const std::map<JobId, Entry>& jobs() const { return jobs_; }
  // The elements of every job's queued chunks and verify copies: what a GPU's window is sized from.
  double queued_elements() const { return double(queued_elements_); }
  JobId served_last() const { return served_last_; }
  void served(JobId id) { served_last_ = id; }

 private:
  std::map<JobId, Entry> jobs_;
  unsigned __int128 queued_elements_ = 0;  // the sum of jobs_'s elements
  JobId served_last_ = 0;  // jobs take turns starting after this one
};

// One job's part of a top-up: the ranges taken for the worker, in the order taken, consecutive runs
// merged while the count fits the wire's UInt32.
struct JobTopUp {
  Job* job = nullptr;
  std::vector<ChunkRange> ranges;
  uint64_t chunks() const {
    uint64_t n = 0;
    for (const ChunkRange& r : ranges) n += r.count;
    return n;
  }
};

// Who else could retry a chunk that failed: a connected worker, not stalled, named none of `names`
// (a restarted worker keeps its name, and its node's files).
class RetryPeers {
 public:
  virtual bool someone_not_named(const std::vector<std::string>& names) const = 0;

 protected:
  ~RetryPeers() = default;
};

struct TopUpContext {
  std::chrono::microseconds report_interval = kReportInterval;  // sizes a GPU's timed window
  // Workers sharing the queued work (each job's chunks, and all of it): this one takes its part.
  uint64_t sharing = 1;
  const VerifyPeers* peers = nullptr;  // verify: who else could take a copy
  // Set when the workers sharing are the whole fleet: the elements in all their windows. Then a
  // top-up brings the worker's window up to the fleet's level, an equal part of all the work queued
  // and held, and no further (plan_top_up).
  const uint64_t* fleet_in_flight_elements = nullptr;
  // The worker's pace, as the Dispatcher measured it (WindowDepth); null: unmeasured.
  const WorkerPace* pace = nullptr;
  // A measured GPU's seconds per element, of the worker's kind (its device name): the depth of an
  // unmeasured GPU's window (window_for). 0: none is measured.
  double kind_seconds_per_element = 0;
  // Retries go elsewhere: a re-queued chunk that failed on (or took down) a worker of this one's
  // name is left for another while `retry` says one is connected. Null: no one else (it retries here).
  const RetryPeers* retry = nullptr;
};

// Chunks of `job` below which a top-up is not cut into parts: one slot's share of the worker's
// element window (2^17 elements for a CPU worker: 2^18 per thread over two slots; a GPU batch). Splitting less than that
// over several workers costs each of them a round trip and gains nothing (bench/README.md,
// "Figures once in code comments").
uint64_t least_worth_splitting(const WorkerRecord& worker, const Job& job);

// The fewest chunks of `job` a turn in a worker's window takes when jobs share it: what is worth
// splitting, and for a GPU whose speed is measured, one report interval of its work, so that a
// report carries a run of one job or two instead of a chunk of each of many (bench/README.md,
// "Figures once in code comments", has what chunk-by-chunk reports cost a fleet).
uint64_t least_turn(const WorkerRecord& worker, const WorkerPace& pace, const Job& job,
                    std::chrono::microseconds report_interval);

// The most jobs queued at which a top-up first takes whole each job that fits in a share of the
// window (plan_top_up): it walks them all.
inline constexpr size_t kMaxJobsTakenWhole = 16;

// Fills `worker`'s free window from the jobs in `queue`, in turn from the one after the last
// served (first, where a few jobs compete, each that fits in a share of the window, whole), until
// no job can take more, the window is full, or the top-up holds the worker's part of all the work
// queued (over `context.sharing` workers; a job worth no split is taken whole all the
// same): verify copies first (the partials they
// are compared with wait for them), then re-queued and fresh chunks. A suspect goes alone to an
// idle worker, which is then `isolating`. The chunks taken are running on the worker and in its
// window; jobs left without work leave the queue. Returns what to send, per job (jobs that got
// nothing are left out).
std::vector<JobTopUp> plan_top_up(WorkerRecord& worker, WorkQueue& queue, const TopUpContext& context);

}  // namespace psched
