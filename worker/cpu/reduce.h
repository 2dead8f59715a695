// The CPU reference of a chunk's work: create the chunk (every element, as the seed benchmark does),
// then reduce the selected elements of scale * x + offset to sum, count, min and max. The CUDA
// backend's tests compare against this.
#pragma once

#include <cstdint>
#include <vector>

#include "common/job_spec.h"
#include "common/partial.h"

namespace psched {

// spec must be validated and normalized. scratch is reused between calls (no allocation in steady
// state); spec.fused skips it and generates only the selected elements.
PartialSum reduce_chunk_cpu(const JobSpec& spec, uint64_t chunk, std::vector<double>& scratch);

}  // namespace psched
