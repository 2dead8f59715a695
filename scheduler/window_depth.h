// Window depth: how many chunks of a job a worker's window holds, a dispatch rule. It is decided
// from what the worker announced (slots, windowElements), the pace the Dispatcher measured of it
// (WorkerPace: device and host time per chunk) and the work queued. The Dispatcher owns the
// measures (WindowDepth); plan_top_up (top_up.h) asks for each job's window as it fills one.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "net/report_pacer.h"
#include "scheduler/ids.h"
#include "scheduler/job.h"
#include "scheduler/peers.h"

namespace psched {

// The most chunks a worker's window may hold, however small they are.
constexpr uint64_t kMaxWindowChunks = uint64_t{1} << 16;
// A GPU's window in device time, once its speed is measured: this many report intervals
// (Dispatcher::report_interval), so the device never waits for a top-up; and the most chunks that
// may be, deep enough that a fleet of tiny chunks is not starved (bench/README.md, "Figures once
// in code comments": the timed window's cap). A dead worker's
// window is blamed as one range, and a suspect range longer than the plain window is halved
// before it runs chunk by chunk (Job::kSuspectsOneByOne), so a deep window costs a kill a few
// more crashes at worst, not millions of lone runs.
constexpr double kWindowIntervals = 4;
constexpr uint64_t kMaxTimedWindowChunks = uint64_t{1} << 22;
static_assert(Job::kSuspectsOneByOne == kMaxWindowChunks, "a plain window lost twice runs chunk by chunk");

// A CPU worker's windowElements are counted for generated elements (~1 ms of normal() a thread:
// worker/cpu/cpu_backend.cpp); it reads and reduces a stored array's elements several times as fast
// (5-10 GB/s a thread), so a stored job's plain window on it is this many times as deep. At 1 x, the
// half window left when it reports (net/report_pacer.h) did not outlast the round trip to its
// top-up: 1 MB chunks of a .npy on a 16-core H200 host kept its threads busy 80-86 % of the job
// (bench/README.md). How small a part of a job is worth splitting off stays as announced
// (least_worth_splitting): small jobs still spread over every worker.
constexpr uint64_t kStoredWindowScale = 4;

// What the Dispatcher measured of one worker's pace, from its reports.
struct WorkerPace {
  // A worker's pace before any report: nothing measured.
  static const WorkerPace& unmeasured();

  // Device seconds per element (GPU workers: their busy time is the device's, without overlap), an
  // average over their ResultBatches; 0 until measured.
  double seconds_per_element = 0;

  // Host seconds per chunk beside the device's, on a GPU (its launch share, its partial read back,
  // reported and handled here): on tiny chunks it is most of what a chunk costs, so a window of
  // report intervals of device time alone held far more work than it should, which a small job of
  // another client waited behind (bench/README.md, "Figures once in code comments"). Measured as what the wall time between its bursts
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

  // A ResultBatch of `worker`'s, `busy_seconds` of its time: a sample of a GPU's speed over the
  // `elements` it computed, and part of its delivery over `chunks`.
  void observe_speed(const WorkerRecord& worker, double busy_seconds, uint64_t elements);
  void reported(double busy_seconds, uint64_t chunks) {
    delivery.busy_seconds += busy_seconds;
    delivery.chunks += chunks;
  }
  // The end of a burst of its reports, before its top-up: a sample of seconds_per_chunk when it
  // held work since the last one's top-up and holds some still.
  void observe_delivery(const WorkerRecord& worker, std::chrono::steady_clock::time_point now);
  // After that top-up: the next sample's start.
  void delivery_from(const WorkerRecord& worker, std::chrono::steady_clock::time_point now);

  // A chunk of `chunk_elements` on this GPU at `per_element` device seconds (its own or its
  // kind's), with the host's share.
  double chunk_seconds(uint64_t chunk_elements, double per_element) const;
};

// The window for chunks of `job` on `worker`, at `pace`: slots, widened to cover window_elements
// (kStoredWindowScale times that for a stored job on a CPU) when its chunks are small, at most
// kMaxWindowChunks. A GPU's window deepens while its share of
// all the work queued (`share_elements`: every job's queued elements over the workers sharing
// them) is more than that: once its speed is measured, to kWindowIntervals report intervals of its
// work (kMaxTimedWindowChunks at most), so that reporting once an interval (net/report_pacer.h)
// keeps it busy (in chunk_seconds: device and host time). Before, it is timed at
// `kind_seconds_per_element` (a measured GPU of its kind's, when there is one: a worker that joins
// a working fleet takes no more than the others, so a kill blames no more). Else, in a fleet whose
// report interval is stretched past kReportInterval (more than 166 workers: psched's round of the
// fleet is as long), kMaxTimedWindowChunks deep, so that the first top-up of a big job is the
// worker's whole share: the first window must outlast two rounds (the first work sent to every
// worker, then their first reports answered), and four plain windows ran a big fleet dry at the
// start of a job. A smaller fleet keeps four plain windows: there whole shares made kills blame
// whole shares (bench/README.md, "Figures once in code comments", has both runs). What one top-up takes stays within the share (plan_top_up), so the windows
// fill from what is left as the work drains.
uint64_t window_for(const WorkerRecord& worker, const WorkerPace& pace, const Job& job,
                    std::chrono::microseconds report_interval = kReportInterval, double share_elements = 0,
                    double kind_seconds_per_element = 0);

// The pace of every worker the Dispatcher was told of, and of each GPU kind: the state the
// window's depth is decided from (and a stalled worker judged by, Scheduler::stall_bound).
class WindowDepth {
 public:
  void joined(WorkerId id) { paces_[id] = WorkerPace{}; }
  void left(WorkerId id) { paces_.erase(id); }
  // Its pace; an unmeasured one for a worker not joined.
  const WorkerPace& pace(WorkerId id) const;

  // A ResultBatch of `worker`'s (WorkerPace::observe_speed, reported); a GPU measured so times
  // unmeasured GPUs of its kind.
  void reported(const WorkerRecord& worker, double busy_seconds, uint64_t chunks, uint64_t elements);
  // The end of a burst of `worker`'s reports, before its top-up, and after it (WorkerPace).
  void burst_handled(const WorkerRecord& worker, std::chrono::steady_clock::time_point now);
  void burst_topped_up(const WorkerRecord& worker, std::chrono::steady_clock::time_point now);

  // The last measured GPU's seconds per element of this device name; 0: none measured.
  double kind_seconds_per_element(const std::string& device_name) const;
  // Device seconds per element per unit of parallelism: a GPU's measure, else the average over what
  // it reported (a CPU's busy time is its threads'); 0 before its first result.
  double measured_seconds_per_element(const WorkerRecord& worker) const;

 private:
  WorkerPace* find(WorkerId id);

  std::unordered_map<WorkerId, WorkerPace> paces_;
  // The last measured GPU's seconds per element, by device name (TopUpContext::kind_seconds_per_element).
  std::unordered_map<std::string, double> kind_seconds_per_element_;
};

}  // namespace psched
