// Device helpers of generate.cu and reduce.cu: an element by generator kind fixed at compile time,
// the loops that make a chunk, and their launch shape. Kernel syntax: nvcc only.
#pragma once

#include <algorithm>
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

// The loops that make a chunk: each writes the box's elements at out[r * box.cols + c].
//
// One thread per column of the box (x runs along a row, so consecutive threads write consecutive
// elements; y over rows), stepping down the rows by the grid's height: a grid of a few waves
// covers any chunk and the row's global base index is one multiply per row. Threads past the
// box's width make nothing. `array_cols`: the array's width (global index = row * array_cols + col).
template <Generator Kind, ElementFormula Formula, typename T>
__device__ __forceinline__ void make_elements(const KeyedGenerator& gen, const ChunkBox& box, uint64_t array_cols,
                                              T* __restrict__ out) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= box.cols) return;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  for (uint32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < box.rows; r += row_stride) {
    const uint64_t index = (box.row0 + r) * array_cols + box.col0 + c;
    out[uint64_t(r) * box.cols + c] = T(generated<Kind, Formula>(gen, index));
  }
}

// normal: one thread per Box-Muller pair (global elements 2m, 2m + 1), making both of its elements
// that fall in the box: half the Philox blocks and logs of one thread per element. Pair slot p of a
// row is pair (base >> 1) + p, where base is the global index of the row's first box element.
template <typename T>
__device__ __forceinline__ void make_normal_pairs(const KeyedGenerator& gen, const ChunkBox& box, uint64_t array_cols,
                                                  T* __restrict__ out) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  for (uint32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < box.rows; r += row_stride) {
    const uint64_t base = (box.row0 + r) * array_cols + box.col0;
    const uint64_t pair = (base >> 1) + p;
    const int64_t c_even = int64_t(2 * pair - base);  // -1 when the row starts on an odd index
    if (c_even >= int64_t(box.cols)) continue;
    const NormalPair z = standard_normal_pair_fast(gen.keys, pair);
    T* row = out + uint64_t(r) * box.cols;
    if (c_even >= 0) row[c_even] = T(scale_normal(gen.param1, z.even, gen.param0));
    if (c_even + 1 < int64_t(box.cols)) row[c_even + 1] = T(scale_normal(gen.param1, z.odd, gen.param0));
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
