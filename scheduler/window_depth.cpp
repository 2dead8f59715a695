#include "scheduler/window_depth.h"

#include <algorithm>

namespace psched {

void WorkerPace::observe_speed(const WorkerRecord& worker, double busy_seconds, uint64_t elements) {
  if (worker.backend != "cuda" || !(busy_seconds > 0) || elements == 0) return;
  const double sample = busy_seconds / double(elements);
  seconds_per_element = seconds_per_element > 0 ? 0.75 * seconds_per_element + 0.25 * sample : sample;
}

void WorkerPace::observe_delivery(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
  if (worker.backend == "cuda" && delivery.held_work && worker.in_flight.size() > 0 && delivery.chunks > 0 &&
      seconds_per_element > 0) {
    const double wall = std::chrono::duration<double>(now - delivery.since).count();
    const double sample = (wall - delivery.busy_seconds) / double(delivery.chunks);
    seconds_per_chunk = delivery.measured ? 0.75 * seconds_per_chunk + 0.25 * sample : sample;
    delivery.measured = true;
  }
  delivery.busy_seconds = 0;
  delivery.chunks = 0;
}

void WorkerPace::delivery_from(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
  delivery.since = now;
  delivery.held_work = worker.in_flight.size() > 0;
}

double WorkerPace::chunk_seconds(uint64_t chunk_elements, double per_element) const {
  return per_element * double(chunk_elements) + std::max(0.0, seconds_per_chunk);
}

uint64_t window_for(const WorkerRecord& worker, const WorkerPace& pace, const Job& job,
                    std::chrono::microseconds report_interval, double share_elements,
                    double kind_seconds_per_element) {
  const uint64_t chunk_elements = job.spec()->chunk_elements();
  const bool stored = job.spec()->stored.kind != SourceKind::kGenerator;
  uint64_t window = worker.window_elements / chunk_elements;
  if (stored && worker.backend != "cuda") window *= kStoredWindowScale;
  window = window < kMaxWindowChunks ? window : kMaxWindowChunks;
  window = window > worker.slots ? window : worker.slots;
  // A stored job's chunk is held for its whole read by one of the worker's readers: one each, beside
  // the slots. (The timed window counts device time; a window of it held only ~24 chunks for 32
  // readers of a Zarr store on a two-H200 host, bench/README.md.)
  const uint64_t reading = stored ? uint64_t(worker.slots) + worker.readers : 0;
  if (worker.backend != "cuda" || share_elements <= double(window) * double(chunk_elements))
    return std::max(window, reading);
  const double per_element = pace.seconds_per_element > 0 ? pace.seconds_per_element : kind_seconds_per_element;
  const double deep = per_element > 0 ? kWindowIntervals * std::chrono::duration<double>(report_interval).count() /
                                            pace.chunk_seconds(chunk_elements, per_element)
                      : report_interval > kReportInterval ? double(kMaxTimedWindowChunks)
                                                          : kWindowIntervals * double(window);
  const double capped = std::min(deep, double(kMaxTimedWindowChunks));
  return std::max(capped > double(window) ? uint64_t(capped) : window, reading);
}

const WorkerPace& WorkerPace::unmeasured() {
  static const WorkerPace none;
  return none;
}

const WorkerPace& WindowDepth::pace(WorkerId id) const {
  auto it = paces_.find(id);
  return it == paces_.end() ? WorkerPace::unmeasured() : it->second;
}

WorkerPace* WindowDepth::find(WorkerId id) {
  auto it = paces_.find(id);
  return it == paces_.end() ? nullptr : &it->second;
}

void WindowDepth::reported(const WorkerRecord& worker, double busy_seconds, uint64_t chunks, uint64_t elements) {
  WorkerPace* pace = find(worker.id);
  if (!pace) return;
  pace->observe_speed(worker, busy_seconds, elements);
  pace->reported(busy_seconds, chunks);
  if (pace->seconds_per_element > 0) kind_seconds_per_element_[worker.device_name] = pace->seconds_per_element;
}

void WindowDepth::burst_handled(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
  if (WorkerPace* pace = find(worker.id)) pace->observe_delivery(worker, now);
}

void WindowDepth::burst_topped_up(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) {
  if (WorkerPace* pace = find(worker.id)) pace->delivery_from(worker, now);
}

double WindowDepth::kind_seconds_per_element(const std::string& device_name) const {
  auto it = kind_seconds_per_element_.find(device_name);
  return it == kind_seconds_per_element_.end() ? 0 : it->second;
}

double WindowDepth::measured_seconds_per_element(const WorkerRecord& worker) const {
  const double own = pace(worker.id).seconds_per_element;
  if (own > 0) return own;
  return worker.elements_done > 0 ? worker.busy_seconds / double(worker.elements_done) : 0;
}

}  // namespace psched
