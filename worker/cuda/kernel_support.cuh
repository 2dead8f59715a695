// The element at a global linear index by generator kind fixed at compile time, for generate.cu
// (which writes chunks) and reduce.cu (which generates a fused chunk's selection on the spot).
// Kernel syntax: nvcc only.
#pragma once

#include <cstdint>

#include "core/generators.h"
#include "worker/cuda/fast_generators.h"
#include "worker/cuda/kernels.cuh"

namespace psched::gpu {

// The element at a global linear index, with the generator kind fixed at compile time.
template <Generator Kind, ElementFormula Formula>
__device__ __forceinline__ double generated(const KeyedGenerator& g, uint64_t index) {
  if constexpr (Formula == ElementFormula::kFast) {
    return element_value_fast<Kind>(g, index);
  } else {
    GeneratorParams fixed = g;
    fixed.kind = Kind;
    return element_value(fixed, index);
  }
}

}  // namespace psched::gpu
