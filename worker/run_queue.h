// RunQueue: a device's queue of chunk runs, each chunks [next, end) of one job, in the order the
// device takes them. One set of rules (push, take from the head, drop a job, give back a job's
// unstarted chunks, jobs taking turns) for the CUDA backend (worker/cuda/cuda_backend.cpp) and
// psched-loadgen's simulated worker (bench/loadgen/sim_worker.cpp), so the simulator queues as the
// real worker does. No lock: the owner holds its own (the CUDA backend's mutex_; the simulated
// worker lives on one Asio loop).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <utility>
#include <vector>

#include "core/chunk_range.h"

namespace psched {

// Cuts the chunks of [first, end) out of a queue of runs (anything with `next` and `end`, the
// queued part of each run; `mine(run)` says whether a run is of the job), splitting a run that
// straddles the cut, and appends what it removed to `out`, in queue order.
template <typename Queue, typename Mine>
void cut_runs(Queue& queue, Mine&& mine, uint64_t first, uint64_t end, std::vector<ChunkRange>& out) {
  for (auto it = queue.begin(); it != queue.end();) {
    const uint64_t lo = it->next > first ? it->next : first;
    const uint64_t hi = it->end < end ? it->end : end;
    if (!mine(*it) || lo >= hi) {
      ++it;
      continue;
    }
    out.push_back(ChunkRange{lo, hi - lo});
    if (lo == it->next && hi == it->end) {
      it = queue.erase(it);
    } else if (lo == it->next) {
      it->next = hi;
      ++it;
    } else if (hi == it->end) {
      it->end = lo;
      ++it;
    } else {  // the middle: the run's tail becomes a run of its own, after it
      auto tail = *it;
      tail.next = hi;
      it->end = lo;
      it = std::next(queue.insert(std::next(it), std::move(tail)));
    }
  }
}

// Jobs take turns on a device's queue (anything with `job_id`: the CPU backend's one entry per
// job, a RunQueue's runs): once a chunk or launch of `job` has been taken from the front, the
// entries of `job` that stand before the first of another job go to the back, so each job queued
// gets its turn before `job`'s next one. A small job queued behind millions of another's small
// chunks (a GPU's window is four report intervals of work, deeper where its measured device time
// leaves out the host's cost per chunk) starts after one turn of each job ahead instead of after
// all of them. One job queued: nothing moves.
template <typename Queue, typename JobId>
void next_job_takes_its_turn(Queue& queue, JobId job) {
  size_t ahead = 0;
  for (auto it = queue.begin(); it != queue.end() && it->job_id == job; ++it) ++ahead;
  if (ahead == queue.size()) return;
  for (; ahead > 0; --ahead) {
    queue.push_back(std::move(queue.front()));
    queue.pop_front();
  }
}

// What a simulated run carries besides its chunks: nothing (the simulator keeps specs per job).
struct NoSpec {
  bool operator==(const NoSpec&) const = default;
};

template <typename Spec>
struct QueuedRun {
  uint64_t job_id = 0, next = 0, end = 0;  // chunks [next, end) of the job, in order
  Spec spec{};                             // what the run's chunks are computed with
};

// Where the owner's copies differ on purpose, each is a parameter:
// - JoinRuns: the CUDA backend joins a run that continues the last one queued (same job and spec),
//   so that runs sent in separate TaskBatches fill a launch; the simulator keeps each batch's range
//   as its own run, as it always has (its fleet figures were measured so).
// - Turns: the CUDA dispatcher lets the next job take its turn after each launch; the simulator
//   runs its queue in order.
// - HeadStarted: the simulator's head chunk is on its device until the head's time is up, so a
//   give-back leaves it; the CUDA backend takes a launch out of the queue before it starts it.
enum class JoinRuns { kNo, kAdjacent };
enum class Turns { kInOrder, kNextJob };
enum class HeadStarted { kNo, kYes };

template <typename Spec>
class RunQueue {
 public:
  using Run = QueuedRun<Spec>;

  bool empty() const { return runs_.empty(); }
  size_t size() const { return runs_.size(); }
  Run& front() { return runs_.front(); }
  const Run& front() const { return runs_.front(); }
  const Run& operator[](size_t i) const { return runs_[i]; }
  void clear() { runs_.clear(); }

  // Chunks first .. first + count - 1 of the job, at the back (nothing when count is 0).
  void push(uint64_t job_id, uint64_t first, uint64_t count, Spec spec, JoinRuns join) {
    if (count == 0) return;
    if (join == JoinRuns::kAdjacent && !runs_.empty() && runs_.back().job_id == job_id &&
        runs_.back().end == first && runs_.back().spec == spec) {
      runs_.back().end += count;
      return;
    }
    runs_.push_back(Run{job_id, first, first + count, std::move(spec)});
  }

  // Takes up to `max` (> 0) chunks from the head run, which must exist: the chunks taken, of the
  // head's job and spec.
  Run take(uint64_t max, Turns turns) {
    Run& head = runs_.front();
    const uint64_t n = head.end - head.next < max ? head.end - head.next : max;
    Run taken{head.job_id, head.next, head.next + n, head.spec};
    head.next += n;
    if (head.next == head.end) runs_.pop_front();
    if (turns == Turns::kNextJob) next_job_takes_its_turn(runs_, taken.job_id);
    return taken;
  }

  // Forgets the job's queued chunks; returns how many there were.
  uint64_t drop_job(uint64_t job_id) {
    uint64_t dropped = 0;
    std::erase_if(runs_, [&](const Run& r) {
      if (r.job_id == job_id) dropped += r.end - r.next;
      return r.job_id == job_id;
    });
    return dropped;
  }

  // The job's chunks of first .. first + count - 1 that are queued and not started: removed and
  // returned in queue order (Backend::give_back).
  std::vector<ChunkRange> give_back(uint64_t job_id, uint64_t first, uint64_t count, HeadStarted head) {
    std::vector<ChunkRange> out;
    if (runs_.empty()) return out;
    if (head == HeadStarted::kYes) {
      Run& h = runs_.front();
      if (h.end - h.next > 1) {  // the head chunk becomes a run of its own
        Run rest = h;
        rest.next = h.next + 1;
        h.end = h.next + 1;
        runs_.insert(std::next(runs_.begin()), std::move(rest));
      }
    }
    // The head is asked for afresh at each run: cut_runs' inserts move the deque's elements.
    const bool keep_head = head == HeadStarted::kYes;
    cut_runs(runs_, [&](const Run& r) { return r.job_id == job_id && !(keep_head && &r == &runs_.front()); }, first,
             first + count, out);
    return out;
  }

 private:
  std::deque<Run> runs_;
};

}  // namespace psched
