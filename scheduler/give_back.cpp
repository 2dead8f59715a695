#include "scheduler/give_back.h"

#include <algorithm>

namespace psched {

namespace {

// Half of a holder's queued chunks (those beyond its parallelism), rounded up: what it gives back.
uint64_t half_of_queued(uint64_t chunks, uint32_t parallelism) { return (chunks - parallelism + 1) / 2; }

}  // namespace

std::optional<TailHolder> pick_tail_holder(const std::vector<TailHolder>& holders, double min_gain_seconds) {
  std::optional<TailHolder> best;
  double best_end = 0;
  for (const TailHolder& h : holders) {
    const uint32_t parallelism = std::max<uint32_t>(1, h.parallelism);
    if (h.chunks <= parallelism || !(h.seconds_per_chunk > 0)) continue;  // nothing queued, or no measure
    const double own = h.seconds_per_chunk / parallelism;                // seconds per chunk, draining
    const double idle = h.idle_seconds_per_chunk > 0 ? h.idle_seconds_per_chunk : own;
    const uint64_t give = half_of_queued(h.chunks, parallelism);
    const double end = double(h.chunks) * own;
    const double split_end = std::max(double(h.chunks - give) * own, double(give) * idle);
    if (end - split_end < min_gain_seconds || (best && end <= best_end)) continue;
    best = h;
    best_end = end;
  }
  return best;
}

std::optional<ChunkRange> back_half(const std::vector<ChunkRange>& running, uint64_t chunks, uint32_t parallelism) {
  if (running.empty() || chunks <= parallelism) return std::nullopt;
  const uint64_t give = std::min(half_of_queued(chunks, parallelism), running.back().count);
  if (give == 0) return std::nullopt;
  return ChunkRange{running.back().end() - give, give};
}

}  // namespace psched
