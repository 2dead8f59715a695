// Splitting a job's tail: when nothing of a job is queued and a worker is idle, the worker whose
// share would end last gives back the back half of its last run (wire GiveBack; it answers with
// what it had not started) and the idle worker takes it. Here only the decision, as pure functions
// over what the scheduler knows (the Dispatcher plans: dispatcher.cpp; the Scheduler sends: dispatch.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "scheduler/range_table.h"

namespace psched {

// A worker holding chunks of a job, as the planner sees it.
struct TailHolder {
  WorkerId worker = 0;
  uint64_t job = 0;
  uint64_t chunks = 0;           // of the job, in flight on the worker
  uint32_t parallelism = 1;      // chunks it computes at once (CPU threads; 1 for a GPU)
  double seconds_per_chunk = 0;  // measured, per chunk per unit of parallelism; 0: unknown
  // The idle worker's seconds per chunk of the job, with its parallelism (0: unknown, taken as
  // the holder's own speed).
  double idle_seconds_per_chunk = 0;
};

// Less than this to gain is not worth a round trip and a re-dispatch (the scheduler asks for at
// least a report interval too: a share that ends within one is left alone).
constexpr double kMinGiveBackGainSeconds = 0.002;

// Whom to ask for an idle worker: the holder whose share would end last, if handing the back
// half of its queued chunks to the idle worker ends that share at least `min_gain_seconds`
// sooner. A holder's chunks beyond its parallelism are the ones queued.
std::optional<TailHolder> pick_tail_holder(const std::vector<TailHolder>& holders,
                                           double min_gain_seconds = kMinGiveBackGainSeconds);

// The range to ask back from a holder whose runs of the job are `running` (by first chunk): the
// back half of its queued chunks (chunks - parallelism), from its last run, whose chunks it
// received last and so starts last. Nothing when no chunk is queued.
std::optional<ChunkRange> back_half(const std::vector<ChunkRange>& running, uint64_t chunks, uint32_t parallelism);

}  // namespace psched
