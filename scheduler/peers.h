// What the scheduler knows of each connected peer: workers (their device, task window and the
// chunks they hold) and clients (their jobs). Pure bookkeeping, owned by the Scheduler's loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "common/connection.h"
#include "common/worker_info.h"
#include "scheduler/job.h"

namespace psched {

// The chunks a worker holds, counted per job. Which chunks they are is the jobs' own record
// (Job::running_on), so nothing here grows with the window: no node per chunk in flight.
class InFlight {
 public:
  uint64_t size() const { return total_; }
  uint64_t of_job(JobId job) const {
    auto it = by_job_.find(job);
    return it == by_job_.end() ? 0 : it->second;
  }
  const std::map<JobId, uint64_t>& by_job() const { return by_job_; }
  void add(JobId job, uint64_t n) {
    by_job_[job] += n;
    total_ += n;
  }
  void remove(JobId job, uint64_t n) {
    auto it = by_job_.find(job);
    if (it == by_job_.end()) return;
    n = n < it->second ? n : it->second;
    total_ -= n;
    if ((it->second -= n) == 0) by_job_.erase(it);
  }
  void forget_job(JobId job) { remove(job, of_job(job)); }

 private:
  std::map<JobId, uint64_t> by_job_;
  uint64_t total_ = 0;
};

// The most chunks a worker's window may hold, however small they are.
constexpr uint64_t kMaxWindowChunks = uint64_t{1} << 16;

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
  InFlight in_flight;
  std::set<JobId> defined_jobs;                    // jobs whose spec it has been sent
  std::chrono::steady_clock::time_point joined = std::chrono::steady_clock::now();

  // The window for chunks of `job`: slots, widened to cover window_elements when its chunks are
  // small, at most kMaxWindowChunks.
  uint64_t window_for(const Job& job) const {
    const JobSpec& s = *job.spec();
    const uint64_t chunk_elements = s.chunk_rows * s.chunk_cols;
    uint64_t window = window_elements / (chunk_elements ? chunk_elements : 1);
    window = window < kMaxWindowChunks ? window : kMaxWindowChunks;
    return window > slots ? window : slots;
  }
  // The widest window_for() any job can get (one-element chunks): a worker holding this many has
  // no room for any job, and dispatch need not look at them.
  uint64_t widest_window() const {
    const uint64_t window = window_elements < kMaxWindowChunks ? window_elements : kMaxWindowChunks;
    return window > slots ? window : slots;
  }
};

struct ClientRecord {
  ClientId id = 0;
  std::string name;
  std::shared_ptr<FramedConnection> conn;
  std::set<JobId> jobs;
  uint64_t tracked_chunks = 0;  // chunks of its jobs in Scheduler::jobs_ (admission's per-client limit)
};

}  // namespace psched
