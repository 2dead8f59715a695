// When a worker that holds work but reports nothing has stalled (docs/design.md, "Dispatch"): a
// hung kernel keeps the heartbeat going, so only the absence of progress shows it. A pure rule, so
// that its numbers can be tested without a clock; Scheduler::check_stalls (stalls.cpp) applies it
// at every heartbeat and acts on it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace psched {

// Device seconds per element assumed for a worker whose speed is not measured yet and has no
// measured peer of its kind: ten times slower than one CPU thread of the 2-core test VM (~1 ns an
// element), so that a first chunk, however big, is never taken for a stall.
inline constexpr double kUnmeasuredSecondsPerElement = 1e-8;
// How many times what a report should take a silent worker may go before it has stalled.
inline constexpr double kStallFactor = 10;

// Seconds a worker holding work may go without a ResultBatch: `stall_timeout_s` (--stall-timeout),
// or, where its chunks are long, kStallFactor times the longest gap its reports should leave: a
// chunk's time (`chunk_elements` at `seconds_per_element`, 0: unmeasured) plus the report interval
// (net/report_pacer.h sends when a chunk finishes, at most once an interval).
inline double stall_bound_seconds(double stall_timeout_s, uint64_t chunk_elements, double seconds_per_element,
                                  double report_interval_s) {
  const double per_element = seconds_per_element > 0 ? seconds_per_element : kUnmeasuredSecondsPerElement;
  return std::max(stall_timeout_s, kStallFactor * (double(chunk_elements) * per_element + report_interval_s));
}

}  // namespace psched
