// Device helpers that generate.cu and reduce.cu share: an element by generator kind fixed at
// compile time, and the one way two SelectionStats combine. Kernel syntax: nvcc only.
#pragma once

#include <cstdint>

#include "common/generators.h"
#include "worker/cuda/fast_generators.h"
#include "worker/cuda/kernels.cuh"

namespace psched::gpu {

// The element at a global linear index, with the generator kind fixed at compile time.
template <Generator Kind, ElementFormula Formula>
__device__ __forceinline__ double generated(const GeneratorParams& g, uint64_t index) {
  if constexpr (Formula == ElementFormula::kFast) {
    return element_value_fast<Kind>(g, index);
  } else {
    GeneratorParams fixed = g;
    fixed.kind = Kind;
    return element_value(fixed, index);
  }
}

struct StatsOp {
  __host__ __device__ SelectionStats operator()(const SelectionStats& a,
                                                const SelectionStats& b) const {
    return SelectionStats{a.sum + b.sum, a.min < b.min ? a.min : b.min,
                          a.max > b.max ? a.max : b.max};
  }
};

__device__ __forceinline__ SelectionStats stats_of(double scale, double x, double offset) {
  const double v = mul_add_rounded(scale, x, offset);
  return SelectionStats{v, v, v};
}

}  // namespace psched::gpu
