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
#include "net/report_pacer.h"
#include "scheduler/job.h"

namespace psched {

// The chunks a worker holds, counted per job, and how much of its window they fill. Which chunks
// they are is the jobs' own record (Job::running_on), so nothing here grows with the window: no
// node per chunk in flight. A job's window is counted in its own chunks (WorkerRecord::window_for:
// thousands of small chunks, a few large ones), so jobs share a worker by the part of the window
// they fill, not by chunk count: a job of one-element chunks filling 65536 chunks of window must
// not keep out a job of 100-element chunks whose window is 2621 (it did, for seconds).
class InFlight {
 public:
  struct Held {
    uint64_t chunks = 0;
    uint64_t units = 0;     // of the window they fill
    uint64_t elements = 0;  // array elements of the chunks
  };
  InFlight() = default;
  InFlight(InFlight&& other) noexcept
      : by_job_(std::move(other.by_job_)),
        total_(other.total_),
        used_(other.used_),
        elements_(other.elements_),
        fleet_elements_(std::exchange(other.fleet_elements_, nullptr)) {}  // counted once
  InFlight& operator=(InFlight&&) = delete;
  ~InFlight() {
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
  // WorkerRecord::window_for), so chunks leave with their share of the units the job holds.
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

// The most chunks a worker's window may hold, however small they are.
constexpr uint64_t kMaxWindowChunks = uint64_t{1} << 16;
// A GPU's window in device time, once its speed is measured: this many report intervals
// (Scheduler::report_interval), so the device never waits for a top-up; and the most chunks that
// may be: 1024 GPUs at 100² chunks ran at 86% of ideal with 2^22, 35% with 2^16. A dead worker's
// window is blamed as one range, and a suspect range longer than the plain window is halved
// before it runs chunk by chunk (Job::kSuspectsOneByOne), so a deep window costs a kill a few
// more crashes at worst, not millions of lone runs.
constexpr double kWindowIntervals = 4;
constexpr uint64_t kMaxTimedWindowChunks = uint64_t{1} << 22;
static_assert(Job::kSuspectsOneByOne == kMaxWindowChunks, "a plain window lost twice runs chunk by chunk");

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

  // Device seconds per element (GPU workers: their busy time is the device's, without overlap), an
  // average over their ResultBatches; 0 until measured.
  double seconds_per_element = 0;
  void observe_speed(double busy_seconds, uint64_t elements) {
    if (backend != "cuda" || !(busy_seconds > 0) || elements == 0) return;
    const double sample = busy_seconds / double(elements);
    seconds_per_element = seconds_per_element > 0 ? 0.75 * seconds_per_element + 0.25 * sample : sample;
  }

  // Host seconds per chunk beside the device's, on a GPU (its launch share, its partial read back,
  // reported and handled here): a GPU busy 14 ns on a one-element chunk delivered one every 0.27 µs
  // on an H200, and a window of four report intervals of device time held 0.4 s of work, which a
  // small job of another client waited behind. Measured as what the wall time between its bursts
  // of reports exceeds the device time they report, per chunk, over the bursts it held work
  // throughout (one that ran dry waited, and the wait is not its cost); an average, so noise
  // either way cancels, and at least 0 where used (chunk_seconds).
  double seconds_per_chunk = 0;
  struct Delivery {  // since its last burst of reports (observe_delivery)
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    bool held_work = false;   // it held work when the last burst's top-up was done
    double busy_seconds = 0;  // reported since
    uint64_t chunks = 0;
    bool measured = false;  // seconds_per_chunk has a sample
  } delivery;
  void reported(double busy_seconds, uint64_t chunks) {
    delivery.busy_seconds += busy_seconds;
    delivery.chunks += chunks;
  }
  // The end of a burst of its reports, before its top-up: a sample of seconds_per_chunk when it
  // held work since the last one's top-up and holds some still.
  void observe_delivery(std::chrono::steady_clock::time_point now) {
    if (backend == "cuda" && delivery.held_work && in_flight.size() > 0 && delivery.chunks > 0 &&
        seconds_per_element > 0) {
      const double wall = std::chrono::duration<double>(now - delivery.since).count();
      const double sample = (wall - delivery.busy_seconds) / double(delivery.chunks);
      seconds_per_chunk = delivery.measured ? 0.75 * seconds_per_chunk + 0.25 * sample : sample;
      delivery.measured = true;
    }
    delivery.busy_seconds = 0;
    delivery.chunks = 0;
  }
  // After that top-up: the next sample's start.
  void delivery_from(std::chrono::steady_clock::time_point now) {
    delivery.since = now;
    delivery.held_work = in_flight.size() > 0;
  }
  // A chunk of `chunk_elements` on this GPU at `per_element` device seconds (its own or its
  // kind's), with the host's share.
  double chunk_seconds(uint64_t chunk_elements, double per_element) const {
    return per_element * double(chunk_elements) + std::max(0.0, seconds_per_chunk);
  }

  // Device seconds per element per unit of parallelism: a GPU's measure, else the average over what
  // it reported (a CPU's busy time is its threads'); 0 before its first result.
  double measured_seconds_per_element() const {
    if (seconds_per_element > 0) return seconds_per_element;
    return elements_done > 0 ? busy_seconds / double(elements_done) : 0;
  }

  // The window for chunks of `job`: slots, widened to cover window_elements when its chunks are
  // small, at most kMaxWindowChunks. A GPU's window deepens while its share of all the work
  // queued (`share_elements`: every job's queued elements over the workers sharing them) is more
  // than that: once its speed is measured, to kWindowIntervals report intervals of its work
  // (kMaxTimedWindowChunks at most), so that reporting once an interval (net/report_pacer.h) keeps
  // it busy (in chunk_seconds: device and host time). Before, it is timed at `kind_seconds_per_element` (a measured GPU of its kind's, when
  // there is one: a worker that joins a working fleet takes no more than the others, so a kill
  // blames no more). Else, in a fleet whose report interval is stretched past kReportInterval (more
  // than 166 workers: psched's round of the fleet is as long), kMaxTimedWindowChunks deep, so that
  // the first top-up of a big job is the worker's whole share: the first window must outlast two
  // rounds (the first work sent to every worker, then their first reports answered), and four plain
  // windows ran 1024 simulated H100s dry for 25-60 ms of a 0.2 s job. A smaller fleet keeps four
  // plain windows: there whole shares made kills blame whole shares (in the e2e test of 64
  // workers, one killed every 50 ms, a chunk took down three of them). What one top-up takes stays
  // within the share (plan_top_up), so the windows fill from what is left as the work drains.
  uint64_t window_for(const Job& job, std::chrono::microseconds report_interval = kReportInterval,
                      double share_elements = 0, double kind_seconds_per_element = 0) const {
    const uint64_t chunk_elements = job.spec()->chunk_elements();
    uint64_t window = window_elements / chunk_elements;
    window = window < kMaxWindowChunks ? window : kMaxWindowChunks;
    window = window > slots ? window : slots;
    if (backend != "cuda" || share_elements <= double(window) * double(chunk_elements)) return window;
    const double per_element = seconds_per_element > 0 ? seconds_per_element : kind_seconds_per_element;
    const double deep = per_element > 0 ? kWindowIntervals * std::chrono::duration<double>(report_interval).count() /
                                              chunk_seconds(chunk_elements, per_element)
                                        : report_interval > kReportInterval ? double(kMaxTimedWindowChunks)
                                                                            : kWindowIntervals * double(window);
    const double capped = std::min(deep, double(kMaxTimedWindowChunks));
    return capped > double(window) ? uint64_t(capped) : window;
  }
};

struct ClientRecord {
  ClientId id = 0;
  std::string name;
  std::shared_ptr<FramedConnection> conn;
  std::set<JobId> jobs;
};

}  // namespace psched
