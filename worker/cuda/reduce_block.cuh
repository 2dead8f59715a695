// What a reducing block does, shared by the two ways of making a chunk's result (kernels.cuh):
// reading a materialized chunk back (reduce.cu) and adding its selected elements as they are
// written (one_pass.cu). A launch's geometry and each chunk's selection in it; each thread keeps a
// TwoSum expansion, min and max (take); the block gathers its threads' exact sums in shared memory
// (exact_device.cuh) and adds its digits, special counts and extremes to the chunk's accumulator
// with global atomics (finish_block). Exact addition is associative, so neither the order nor the
// grid shape can change a bit of the result. Kernel syntax: nvcc only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/chunk_grid.h"
#include "core/generators.h"
#include "core/job_spec.h"
#include "worker/cuda/exact_device.cuh"
#include "worker/cuda/exact_result.h"
#include "worker/cuda/kernels.cuh"

namespace psched::gpu {

// The job's geometry as the kernels see it; chunk z of the launch is first_chunk + z.
struct BatchGeometry {
  GeneratorParams gen;
  ChunkGrid grid;
  Slice row_sel, col_sel;
  uint64_t first_chunk;
  uint64_t stride;  // elements between two chunks' boxes in the buffer
  double scale, offset;
};

// Chunk z's box and selection, worked out on the device from the same shared geometry the host
// and the CPU backend use.
struct ChunkSelection {
  ChunkBox box;
  AxisRun rows, cols;
  __device__ uint64_t count() const { return rows.count * cols.count; }
};

__device__ inline ChunkSelection selection_of(const BatchGeometry& g, uint32_t z) {
  ChunkSelection s;
  s.box = g.grid.box(g.first_chunk + z);
  s.rows = select_axis(s.box.row0, s.box.row0 + s.box.rows, g.row_sel.start, g.row_sel.stop,
                       g.row_sel.step);
  s.cols = select_axis(s.box.col0, s.box.col0 + s.box.cols, g.col_sel.start, g.col_sel.stop,
                       g.col_sel.step);
  return s;
}

// At most ceil(length / step) indices of a window of `length` are selected.
inline uint64_t most_selected(uint64_t length, uint64_t step) {
  return length / step + (length % step != 0 ? 1 : 0);
}

// The most elements a chunk of the job selects: the bound for every chunk of the launch.
inline uint64_t most_selected(const ChunkWork& w) {
  const ChunkGrid& grid = w.grid;
  const uint64_t rows = grid.chunk_rows < grid.rows ? grid.chunk_rows : grid.rows;
  const uint64_t cols = grid.chunk_cols < grid.cols ? grid.chunk_cols : grid.cols;
  return most_selected(rows, w.row_sel.step) * most_selected(cols, w.col_sel.step);
}

inline BatchGeometry batch_geometry(const BatchWork& b) {
  const ChunkWork& w = b.first;
  return BatchGeometry{w.gen, w.grid, w.row_sel, w.col_sel, w.chunk, b.stride_elements, w.scale, w.offset};
}

// A digit of a chunk's accumulator takes at most one piece (< 2^32) per element and two per
// thread, so int64 holds the block-level sums without carrying below 2^30 selected elements per
// chunk; above that each block carries its digits before adding them (kernels.cuh's limit is 2^31).
constexpr uint64_t kCarryBlocksAbove = uint64_t{1} << 30;

// What a reducing block holds in shared memory: its exact sum, and each warp's min and max.
template <uint32_t Threads>
struct BlockSum {
  BlockExact exact;
  double warp_min[Threads / 32], warp_max[Threads / 32];
};

// Every thread of the block (t: its linear index), before any take: the block's sum zeroed.
template <uint32_t Threads>
__device__ __forceinline__ void start_block(BlockSum<Threads>& b, uint32_t t) {
  for (uint32_t i = t; i < kExactDigits; i += Threads) b.exact.digit[i] = 0;
  if (t == 0) b.exact.nan = b.exact.pos_inf = b.exact.neg_inf = 0;
  __syncthreads();
}

// One element v into a thread's expansion, min and max; what the expansion cannot hold, and NaN
// and infinities, into the block's exact sum.
__device__ __forceinline__ void take(double v, Expansion& e, double& lo, double& hi, BlockExact& b) {
  if (fabs(v) <= 1.7976931348623157e308) {
    const double rest = e.add(v);
    if (rest != 0.0) add_exact(b, rest);  // rare: see Expansion::add
    lo = fmin(lo, v);
    hi = fmax(hi, v);
  } else {  // NaN (kept out of min and max) or an infinity
    add_special(b, v);
    if (v == v) {
      lo = fmin(lo, v);
      hi = fmax(hi, v);
    }
  }
}

// Serial carry of a block's digits (one thread): digits 0..66 into [0, 2^32).
__device__ inline void carry_digits(BlockExact& b) {
  long long carry = 0;
  for (int i = 0; i + 1 < kExactDigits; ++i) {
    const long long t = static_cast<long long>(b.digit[i]) + carry;
    b.digit[i] = static_cast<unsigned long long>(t & 0xffffffffll);
    carry = t >> 32;
  }
  b.digit[kExactDigits - 1] += static_cast<unsigned long long>(carry);
}

// Every thread of the block, converged, once it has taken all its elements (t: its linear index):
// the threads' expansions into the block's sum, then the block's digits, special counts, min and
// max into `out` with global atomics (carried first when the chunk selects more than
// kCarryBlocksAbove elements: carry_blocks).
template <uint32_t Threads>
__device__ __forceinline__ void finish_block(BlockSum<Threads>& b, const Expansion& e, double lo, double hi,
                                             uint32_t t, bool carry_blocks, ChunkAccumulator& out) {
  const uint32_t warp = t / 32, lane = t % 32;
  __syncwarp();
  add_exact_warp(b.exact, e.hi, lane);
  add_exact_warp(b.exact, e.lo, lane);
#pragma unroll
  for (int d = 16; d > 0; d /= 2) {
    lo = fmin(lo, __shfl_xor_sync(0xffffffffu, lo, d));
    hi = fmax(hi, __shfl_xor_sync(0xffffffffu, hi, d));
  }
  if (lane == 0) {
    b.warp_min[warp] = lo;
    b.warp_max[warp] = hi;
  }
  __syncthreads();
  if (carry_blocks && t == 0) carry_digits(b.exact);
  if (carry_blocks) __syncthreads();

  if (t < kExactDigits) {
    const unsigned long long d = b.exact.digit[t];
    if (d != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&out.exact.digit[t]), d);
  } else if (t == kExactDigits && b.exact.nan != 0) {
    atomicAdd(&out.exact.nan, b.exact.nan);
  } else if (t == kExactDigits + 1 && b.exact.pos_inf != 0) {
    atomicAdd(&out.exact.pos_inf, b.exact.pos_inf);
  } else if (t == kExactDigits + 2 && b.exact.neg_inf != 0) {
    atomicAdd(&out.exact.neg_inf, b.exact.neg_inf);
  } else if (t == kExactDigits + 3) {
    double m = b.warp_min[0], x = b.warp_max[0];
    for (uint32_t w = 1; w < Threads / 32; ++w) {
      m = fmin(m, b.warp_min[w]);
      x = fmax(x, b.warp_max[w]);
    }
    if (m <= x) {  // else every element of the block was a NaN
      atomicMax(&out.min_key, ~order_key(m));
      atomicMax(&out.max_key, order_key(x));
    }
  }
}

// Turns the accumulators acc[0 .. count) into their results (compact_result, exact_result.h), one
// thread a chunk (reduce.cu). Throws CudaError when the launch fails.
void launch_finalize(uint32_t count, const ChunkAccumulator* acc, ChunkResult* results, cudaStream_t stream);

}  // namespace psched::gpu
