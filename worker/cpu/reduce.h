// The CPU reference of a chunk's work: create the chunk (every element, as the DeepOps benchmark does,
// into a chunk-sized buffer), then reduce the selected elements of scale * x + offset, read back
// from the buffer, to sum, count, min and max. The CUDA backend's tests compare against this. The
// loops run in the vectorised kernels of kernels.h; the sum is exact (PartialSum::exact) and `sum`
// its correct rounding, so it depends on the selected elements alone.
#pragma once

#include <cstdint>
#include <vector>

#include "core/chunk_grid.h"
#include "core/job_spec.h"
#include "core/partial.h"
#include "core/status.h"
#include "worker/cpu/chunk_buffer.h"

namespace psched {

// spec must be validated and normalized. scratch is reused between calls (no allocation in steady
// state); spec.fused skips it and generates only the selected elements.
PartialSum reduce_chunk_cpu(const JobSpec& spec, uint64_t chunk, std::vector<double>& scratch);
// The same into `buffer`, the CPU backend's way: the partial as the worker reports it (its exact
// sum split into terms once, not copied out as an accumulator).
CompactPartial reduce_chunk_cpu(const JobSpec& spec, uint64_t chunk, ChunkBuffer& buffer);

// A chunk of a stored array (spec.stored.stored()): its elements read by `reader`, then reduced
// the same way. A chunk that cannot be read returns the reader's one-line error.
class ChunkReader;
Status reduce_stored_chunk_cpu(const JobSpec& spec, uint64_t chunk, ChunkReader& reader, std::vector<double>& scratch,
                               PartialSum& out);
Status reduce_stored_chunk_cpu(const JobSpec& spec, uint64_t chunk, ChunkReader& reader, ChunkBuffer& buffer,
                               CompactPartial& out);

// A stored chunk shared by several threads: the bands of rows of about band_bytes each (as doubles)
// that its chunk is cut into (1 where the array is read whole: Zarr, Fortran order; 1024 at most),
// band `band` of `bands` as a box, and one band reduced. The bands' partials merged (merge(), exact)
// are the chunk's partial, bit for bit, however the bands are cut. The CPU backend cuts big chunks
// so that a job of few chunks keeps every thread busy to its end (worker/cpu/cpu_backend.cpp).
uint32_t stored_bands(const JobSpec& spec, uint64_t chunk, uint64_t band_bytes);
ChunkBox stored_band(const JobSpec& spec, uint64_t chunk, uint32_t band, uint32_t bands);
Status reduce_stored_band_cpu(const JobSpec& spec, uint64_t chunk, const ChunkBox& band, ChunkReader& reader,
                              ChunkBuffer& buffer, PartialSum& out);

}  // namespace psched
