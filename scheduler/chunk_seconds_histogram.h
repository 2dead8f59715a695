// The fixed-bucket histogram of chunk compute seconds that the Scheduler fills as ResultBatches
// arrive (it lives in SchedulerCounters) and /metrics renders (metrics.h) as
// psched_chunk_seconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace psched {

// Chunk compute seconds as workers report them. A ResultBatch carries the backend's busy seconds
// for all of its chunks together, so every chunk of a batch is counted at the batch average.
struct ChunkSecondsHistogram {
  static constexpr std::array<double, 18> kBounds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                                     0.01,   0.025,   0.05,   0.1,   0.25,   0.5,
                                                     1,      2.5,     5,      10,    30,     60};
  std::array<uint64_t, kBounds.size()> in_bucket{};  // per bucket, not cumulative; +Inf is the rest
  uint64_t count = 0;
  double sum_seconds = 0;

  void observe(double seconds, uint64_t chunks) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    if (i < kBounds.size()) in_bucket[i] += chunks;
    count += chunks;
    sum_seconds += seconds * double(chunks);
  }
};

}  // namespace psched
