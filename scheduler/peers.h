// What the scheduler knows of each connected peer: workers (their device, task window and the
// chunks they hold) and clients (their jobs). Pure bookkeeping, owned by the Scheduler's loop.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/worker_info.h"
#include "net/connection.h"
#include "scheduler/job.h"

namespace psched {

// A worker's window as the scheduler books it: the chunks the worker holds, counted per job, and
// how much of the window they fill (how deep the window is, is the Dispatcher's: window_depth.h).
// Which chunks they are is the jobs' own record (Job::running_on), so nothing here grows with the
// window: no node per chunk in flight. A job's window is counted in its own chunks (window_for:
// thousands of small chunks, a few large ones), so jobs share a worker by the part of the window
// they fill, not by chunk count: a job of one-element chunks filling 65536 chunks of window must
// not keep out a job of 100-element chunks whose window is 2621 (it did, for seconds).
class WorkerWindow {
 public:
  struct Held {
    uint64_t chunks = 0;
    uint64_t units = 0;     // of the window they fill
    uint64_t elements = 0;  // array elements of the chunks
  };
  WorkerWindow() = default;
  WorkerWindow(WorkerWindow&& other) noexcept
      : by_job_(std::move(other.by_job_)),
        total_(other.total_),
        used_(other.used_),
        elements_(other.elements_),
        fleet_elements_(std::exchange(other.fleet_elements_, nullptr)) {}  // counted once
  WorkerWindow& operator=(WorkerWindow&&) = delete;
  ~WorkerWindow() {
    if (fleet_elements_) *fleet_elements_ -= elements_;
  }
  // The count of elements in every worker's window, which this one's join and leave (set while empty).
  void count_into(uint64_t* fleet_elements) { fleet_elements_ = fleet_elements; }
  // A full window, in units; a chunk of a job whose window is W chunks fills kFull / W of them.
  static constexpr uint64_t kFull = uint64_t{1} << 40;
  static uint64_t unit_for(uint64_t window) { return kFull / (window > 0 ? window : 1); }

  uint64_t size() const { return total_; }  // chunks, of every job
  bool full() const { return used_ >= kFull; }
  // Chunks of a job with `unit` that still fit.
  uint64_t room(uint64_t unit) const { return full() ? 0 : (kFull - used_) / unit; }
  uint64_t of_job(JobId job) const {
    auto it = by_job_.find(job);
    return it == by_job_.end() ? 0 : it->second.chunks;
  }
  const std::map<JobId, Held>& by_job() const { return by_job_; }
  uint64_t elements() const { return elements_; }  // of every job
  void add(JobId job, uint64_t n, uint64_t unit = 1, uint64_t chunk_elements = 0) {
    Held& h = by_job_[job];
    h.chunks += n;
    h.units += n * unit;
    h.elements += n * chunk_elements;
    total_ += n;
    used_ += n * unit;
    count_elements(n * chunk_elements, +1);
  }
  // A job's window may change while it holds chunks (it widens once the worker's speed is known:
  // WindowDepth), so chunks leave with their share of the units the job holds.
  void remove(JobId job, uint64_t n) {
    auto it = by_job_.find(job);
    if (it == by_job_.end()) return;
    Held& h = it->second;
    n = n < h.chunks ? n : h.chunks;
    const uint64_t units = n == h.chunks ? h.units : uint64_t((unsigned __int128)h.units * n / h.chunks);
    // Every chunk of a job is counted at its chunk size (add), so this divides exactly.
    const uint64_t elements = n == h.chunks ? h.elements : h.elements / h.chunks * n;
    total_ -= n;
    used_ -= units;
    h.units -= units;
    h.elements -= elements;
    count_elements(elements, -1);
    if ((h.chunks -= n) == 0) by_job_.erase(it);
  }
  void forget_job(JobId job) { remove(job, of_job(job)); }

 private:
  void count_elements(uint64_t n, int sign) {
    elements_ = sign > 0 ? elements_ + n : elements_ - n;
    if (fleet_elements_) *fleet_elements_ = sign > 0 ? *fleet_elements_ + n : *fleet_elements_ - n;
  }

  std::map<JobId, Held> by_job_;
  uint64_t total_ = 0;
  uint64_t used_ = 0;  // units of the window filled
  uint64_t elements_ = 0;
  uint64_t* fleet_elements_ = nullptr;
};

// Device seconds per second a worker can deliver: a CUDA worker reports busy time without overlap
// (one device), a CPU worker one chunk per thread at a time. 0: a backend we cannot judge.
inline double parallelism(const WorkerInfo& w) {
  if (w.backend == "cuda") return 1.0;
  if (w.backend == "cpu") return double(w.threads > 0 ? w.threads : 1);
  return 0.0;
}

// A worker as it announced itself (WorkerInfo: id and totals kept here), plus what only the
// scheduler tracks.
struct WorkerRecord : WorkerInfo {
  uint64_t memory_used_bytes = 0;  // from its heartbeats

  std::shared_ptr<FramedConnection> conn;
  WorkerWindow in_flight;
  std::set<JobId> defined_jobs;                    // jobs whose spec it has been sent
  // Completed jobs it was sent, whose DropJob rides with the next message to it (Scheduler::
  // forget_job): nothing of theirs is left on it, so the drop need not cost a write of its own.
  std::vector<JobId> drops_owed;
  // Running a suspect chunk alone (Job::take_suspect): it gets nothing more until its window is
  // empty again, so that if it dies, the suspect is the one to blame.
  bool isolating = false;
  // It held nothing but the work in question (a suspect, or a lone chunk or copy): a crash there
  // is shown, and counts against --allowed-failures (Scheduler::requeue_lost, verify_worker_gone).
  bool ran_alone() const { return isolating || in_flight.size() <= 1; }
  // Results of its came in the burst of frames being handled: it is topped up once the burst is
  // (Scheduler::on_frames_handled), not after each job's ResultBatch, so that a report of several
  // jobs gets one top-up and its window is not cut into a sliver of each job.
  bool top_up_owed = false;
  // A GiveBack was sent and its answer has not come: for this idle worker (0: none; dispatch.cpp).
  WorkerId giving_back_to = 0;
  uint64_t elements_done = 0;  // array elements of the chunks it finished
  std::chrono::steady_clock::time_point joined = std::chrono::steady_clock::now();
  // Stalls (scheduler/stall.h, stalls.cpp): when its work last moved (its last ResultBatch, or work
  // handed to it while it held none); `stalled` while it holds work it made no progress on for too
  // long: its work was re-queued and it gets none until it reports again. `stalled_once` stays:
  // its results for chunks re-queued then are late, not a protocol error.
  std::chrono::steady_clock::time_point progress_at = std::chrono::steady_clock::now();
  bool stalled = false, stalled_once = false;
};

struct ClientRecord {
  ClientId id = 0;
  std::string name;
  std::shared_ptr<FramedConnection> conn;
  std::set<JobId> jobs;
};

}  // namespace psched
