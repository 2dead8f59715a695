// Which jobs the CUDA backend computes in batches of chunks, and how big a batch is (docs/design.md,
// "Batched launches"). Plain C++, so the worker's window, the kernels and the load generator's
// simulated GPU share one definition.
#pragma once

#include <cstdint>

#include "core/job_spec.h"

namespace psched::gpu {

// Chunks of at most this many elements are computed in batches (kernels.cuh); larger ones one at a
// time. A property of the job alone (and a chunk's partial is its exact sum, which no batch can
// change).
constexpr uint64_t kBatchMaxChunkElements = uint64_t{1} << 25;
// A stored array's chunks are read one at a time (storage/chunk_reader.h), so they launch one at a
// time too.
inline bool batched(const JobSpec& spec) {
  return !spec.stored.stored() && spec.chunk_rows * spec.chunk_cols <= kBatchMaxChunkElements;
}

// Elements one batch of small chunks aims at: enough work per launch (~0.1 ms on an H100) that
// launches, events and round trips vanish behind it, small enough that several batches fill the
// streams.
constexpr uint64_t kBatchTargetElements = uint64_t{1} << 25;
// The most chunks in one batch (the grid's y and z dimensions hold one chunk each).
constexpr uint32_t kMaxBatchChunks = 8192;

// Chunks of `spec` in one batch before the memory limit: 1 for unbatched jobs.
inline uint64_t chunks_per_batch(const JobSpec& spec) {
  if (!batched(spec)) return 1;
  const uint64_t elements = spec.chunk_rows * spec.chunk_cols;
  const uint64_t chunks = kBatchTargetElements / (elements ? elements : 1);
  return chunks < 1 ? 1 : chunks < kMaxBatchChunks ? chunks : kMaxBatchChunks;
}

}  // namespace psched::gpu
