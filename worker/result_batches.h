// ResultBatches cut to the scheduler's frame limit: a worker reports every outcome that arrived
// while its loop was busy in one batch, which for small chunks can be tens of thousands of them;
// a batch over the scheduler's --max-frame would be refused and the worker cut off (and its chunks
// blamed on it as if it died). The limit comes from Welcome.maxFrameBytes.
#pragma once

#include <capnp/message.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "worker/backend.h"

namespace psched {

// Failure messages longer than this are cut (the scheduler shows at most 1000 characters anyway).
constexpr size_t kMaxFailureMessageBytes = 1000;

// Builds the ResultBatches for one job's `outcomes`, each within `max_frame_bytes` (the whole of a
// frame's body), and hands each to `send`. Every run of consecutive chunks that finished goes out as
// one partial (ChunkPartial.chunks; the exact sums merged here), cut at every multiple of
// `partial_block` (DefineJob.partialBlock: 0 never, 1 at every chunk). busySeconds is split by
// outcome, and energyJoules is each batch's busySeconds x `joules_per_busy_second` (what the
// report's energy came to per busy second, EnergyMeter; 0 without NVML).
void build_result_batches(uint64_t job_id, const std::vector<ChunkOutcome>& outcomes,
                          uint32_t max_frame_bytes, uint64_t partial_block,
                          const std::function<void(capnp::MessageBuilder&)>& send,
                          double joules_per_busy_second = 0);

// The answer to a GiveBack: a ResultBatch for `job_id` whose `returned` lists the chunks given back
// (none is an answer too), handed to `send`. Returns how many chunks that is.
uint64_t build_returned_batch(uint64_t job_id, const std::vector<ChunkRange>& returned,
                              const std::function<void(capnp::MessageBuilder&)>& send);

}  // namespace psched
