// Dispatcher: the dispatch policy and its state, apart from the sockets. It holds the jobs with
// work waiting (WorkQueue), the idle workers, where the next round of the fleet starts, the pace of
// each worker and GPU kind that its windows' depth is decided from (WindowDepth, window_depth.h)
// and the elements in every window, and answers what to do as plans: the top-ups each worker gets
// (plan_top_up, top_up.h) and the GiveBack that splits a job's tail (give_back.h).
// The Scheduler (dispatch.cpp) sends what it plans and keeps it told of jobs and workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/give_back.h"
#include "scheduler/peers.h"
#include "scheduler/top_up.h"
#include "scheduler/verify_search.h"
#include "scheduler/window_depth.h"

namespace psched {

// Report interval per connected worker (Dispatcher::report_interval), and the longest interval:
// reports stay near 33,000 a second up to 4166 workers, and a killed worker loses at most one
// interval of finished work (125 ms, within the 0.2 s a kill may cost).
inline constexpr std::chrono::microseconds kReportCostPerWorker{30};
inline constexpr std::chrono::microseconds kMaxReportInterval{125000};
// A tail is split (Dispatcher::split_tail) after a look over the workers' shares at most once a
// period (1 ms, 4 µs per worker in a large fleet: a look costs well under that), and only while at
// most this many jobs run.
inline constexpr std::chrono::microseconds kSplitTailPeriod{1000};
inline constexpr std::chrono::microseconds kSplitTailCostPerWorker{4};
inline constexpr size_t kMaxJobsToSplit = 8;

class Dispatcher {
 public:
  using Workers = std::map<WorkerId, std::unique_ptr<WorkerRecord>>;
  // Whether a worker can be sent anything (its connection is open).
  using Reachable = bool (*)(const WorkerRecord&);

  // What one worker gets: per job, the ranges taken into its window (already counted there).
  struct TopUp {
    WorkerRecord* worker;
    std::vector<JobTopUp> jobs;
  };
  // Ask `from` to give back `range` of `job` for the idle worker (from->giving_back_to is set).
  struct GiveBack {
    WorkerRecord* from;
    JobId job;
    ChunkRange range;
  };
  // What a worker's report (or join) leads to: top-ups while work is queued, else at most a GiveBack.
  struct Plan {
    std::vector<TopUp> top_ups;
    std::optional<GiveBack> give_back;
  };

  // Borrows the Scheduler's workers and jobs (read, and the chosen workers' windows filled) and
  // who else could take a verify copy or a retry.
  Dispatcher(const Workers& workers, const JobTable& jobs, const VerifyPeers& verify, const RetryPeers& retry,
             Reachable reachable)
      : workers_(workers), jobs_(jobs), verify_(verify), retry_(retry), reachable_(reachable) {}
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // How often workers report (TaskBatch.reportIntervalUs): kReportInterval, lengthened by
  // kReportCostPerWorker for each worker, so that a fleet's reports (and the top-ups they bring)
  // stay near 33,000 a second: a report and its top-up cost psched 25-30 µs on a 2-core VM, most
  // of it the kernel's loopback TCP (docs/design.md, "Dispatch").
  std::chrono::microseconds report_interval() const;

  // What the Scheduler tells it.
  void job_changed(Job& job) { work_.update(job); }  // after anything that may change a job's work
  void job_gone(JobId id) { work_.forget(id); }
  void worker_joined(WorkerRecord& worker) {
    worker.in_flight.count_into(&in_flight_elements_);
    depth_.joined(worker.id);
  }
  void worker_left(WorkerId id) {
    idle_.erase(id);
    depth_.left(id);
  }
  // A ResultBatch of `worker`'s: `chunks` chunks of `elements` in all, in `busy_seconds` of its
  // time, measure its pace (a GPU's times the unmeasured GPUs of its kind).
  void reported(const WorkerRecord& worker, double busy_seconds, uint64_t chunks, uint64_t elements) {
    depth_.reported(worker, busy_seconds, chunks, elements);
  }
  // A burst of `worker`'s reports was handled (before its top-up), and it was topped up: the wall
  // time between bursts measures its host time per chunk (WorkerPace::seconds_per_chunk).
  void burst_handled(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
    depth_.burst_handled(worker, now);
  }
  void burst_topped_up(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
    depth_.burst_topped_up(worker, now);
  }
  // What it measured of a worker's speed (WindowDepth), and of its kind's.
  double measured_seconds_per_element(const WorkerRecord& worker) const {
    return depth_.measured_seconds_per_element(worker);
  }
  double kind_seconds_per_element(const std::string& device_name) const {
    return depth_.kind_seconds_per_element(device_name);
  }
  // The GiveBack for `idle` came back with nothing unstarted: it waits for the next report.
  void tail_waits(WorkerId idle) { tail_idle_ = idle; }

  bool has_work() const { return !work_.empty(); }
  // Workers that held nothing after their last top-up.
  std::vector<WorkerId> idle() const { return {idle_.begin(), idle_.end()}; }

  // A round of the fleet: each worker in turn shares what is left with the workers after it; once
  // nothing is queued the rest need not look. The round starts at the worker the last round gave
  // work to (next fit), not at the first: a storm of small jobs, each dispatched as it comes,
  // otherwise walked past the same full windows every time (bench/README.md, "Bursts read whole,
  // small jobs placed by next fit"). A worker passed over gets its top-up from its own
  // report (plan_for).
  std::vector<TopUp> plan_round();
  // One worker: its part of what is queued (`sharing` workers share each job; 0: every worker, and
  // its window is filled to the fleet's level), or at a job's tail a GiveBack for it or for an idle
  // worker still waiting for one. `now` paces the look over the tails.
  Plan plan_for(WorkerRecord& worker, uint64_t sharing, std::chrono::steady_clock::time_point now);

 private:
  void top_up(WorkerRecord& worker, uint64_t sharing, std::vector<TopUp>& planned);
  void note_idle(const WorkerRecord& worker);
  // Nothing queued and `idle` holds nothing: the worker whose share of a job would end last is
  // asked for the back half of it (scheduler/give_back.h).
  std::optional<GiveBack> split_tail(WorkerRecord& idle, std::chrono::steady_clock::time_point now);

  const Workers& workers_;
  const JobTable& jobs_;
  const VerifyPeers& verify_;
  const RetryPeers& retry_;
  Reachable reachable_;

  // The jobs with work waiting for a worker, in turn (job_changed after anything that may change
  // a job's work).
  WorkQueue work_;
  // Elements of the chunks in every worker's window (WorkerWindow::count_into): the Dispatcher is
  // declared before the workers, whose windows take theirs back as they go.
  uint64_t in_flight_elements_ = 0;
  // Each worker's and GPU kind's pace, that windows are deepened by.
  WindowDepth depth_;
  WorkerId dispatch_from_ = 0;  // where plan_round's turn over the workers starts: the last it gave work to
  std::set<WorkerId> idle_;     // workers that held nothing after their last top-up
  WorkerId tail_idle_ = 0;      // an idle worker whose split_tail found no share to split yet (0: none)
  std::chrono::steady_clock::time_point next_split_look_{};  // split_tail looks at most once a kSplitTailPeriod
  // split_tail's list of holders, kept between looks: built anew each look, it was a fifth of
  // psched's allocation cost for one job on 1024 workers (a vector grown to a thousand entries).
  std::vector<TailHolder> tail_holders_;
};

}  // namespace psched
