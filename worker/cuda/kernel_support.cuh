// Device helpers that generate.cu, reduce.cu and one_pass.cu share: an element by generator kind
// fixed at compile time, and the launch shape of a kernel that makes chunks. Kernel syntax: nvcc only.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/generators.h"
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

// A launch shape for `count` boxes of at most rows x cols elements: blocks of 256 threads as wide
// as the row allows (a power of two; the rest stacked over rows so narrow chunks still write
// contiguous memory with full blocks), about 32 blocks per SM in all (whole waves for any occupancy
// that divides 32, each block looping over rows, so the tail of the last wave is at most one row
// per block).
struct LaunchShape {
  dim3 grid, block;
};

inline LaunchShape shape_for(uint64_t rows, uint64_t cols, uint32_t count, int sm_count) {
  uint32_t bx = 1;
  while (bx < 256 && bx < cols) bx *= 2;
  const uint32_t by = 256 / bx;
  const uint64_t grid_x = (cols + bx - 1) / bx;
  const uint64_t row_blocks = (rows + by - 1) / by;
  const uint64_t target_blocks = uint64_t(std::max(sm_count, 1)) * 32;
  uint64_t grid_y = std::max<uint64_t>(1, target_blocks / (grid_x * count));
  grid_y = std::min<uint64_t>({grid_y, row_blocks, 65535});
  return LaunchShape{dim3{uint32_t(grid_x), uint32_t(grid_y), count}, dim3{bx, by, 1}};
}

}  // namespace psched::gpu
