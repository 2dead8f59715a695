// What a reducing block does (reduce.cu, for materialized, stored and fused chunks alike). A
// launch's geometry and each chunk's selection in it; each thread keeps a TwoSum expansion, min
// and max, and for a var/std job one of the squares (take); the block gathers its threads' exact
// sums in shared memory (exact_device.cuh) and adds its digits, special counts and extremes to the
// chunk's accumulators with global atomics (finish_block). Exact addition is associative, so
// neither the order nor the grid shape can change a bit of the result. Kernel syntax: nvcc only.
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
  KeyedGenerator gen;
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

// A digit of a chunk's accumulator takes at most three pieces (< 2^32) per element (an expansion's
// spill and its emptied terms: Expansion::add_or_empty) and two per thread, so int64 holds the
// block-level sums without carrying below 2^28 selected elements per chunk (3 x 2^28 x 2^32 <
// 2^62); above that each block carries its digits before adding them (kernels.cuh's limit is
// 2^31). A var/std job's squares take two terms per element, so such a job carries above half that.
constexpr uint64_t kCarryBlocksAbove = uint64_t{1} << 28;
inline bool carry_blocks(uint64_t selected, bool squares) {
  return selected > (squares ? kCarryBlocksAbove / 2 : kCarryBlocksAbove);
}

// What a reducing block holds in shared memory: its exact sum (and, for a var/std job, that of
// the squares), and each warp's min and max.
template <uint32_t Threads>
struct BlockSum {
  BlockExact exact, squares;
  double warp_min[Threads / 32], warp_max[Threads / 32];
};

// A thread's running sums: its expansion, min and max, and (Squares) two expansions for the
// squares, one for their high parts and one for their low parts. One expansion for both would add
// terms ~2^-53 apart in magnitude whose bits reach far below the running error's last bit, and hand
// nearly every low part back to the block's shared sum (4x the time of a sum-only job, measured on
// an H200); apart, each expansion's error term holds its additions' errors exactly, as the sum's does.
struct ThreadSums {
  Expansion e, sq_high, sq_low;
  double lo, hi;
  __device__ ThreadSums() : lo(double_of(0x7ff0000000000000ull)), hi(-lo) {}
};

// Every thread of the block (t: its linear index), before any take: the block's sums zeroed.
template <bool Squares, uint32_t Threads>
__device__ __forceinline__ void start_block(BlockSum<Threads>& b, uint32_t t) {
  for (uint32_t i = t; i < kExactDigits; i += Threads) b.exact.digit[i] = 0;
  if (t == 0) b.exact.nan = b.exact.pos_inf = b.exact.neg_inf = 0;
  if (Squares) {
    for (uint32_t i = t; i < kExactDigits; i += Threads) b.squares.digit[i] = 0;
    if (t == 0) b.squares.nan = b.squares.pos_inf = b.squares.neg_inf = 0;
  }
  __syncthreads();
}

// A finite v into an expansion; what it cannot hold into the block's exact sum.
__device__ __forceinline__ void add_to(Expansion& e, double v, BlockExact& b) {
  e.add_or_empty(v, [&](double x) { add_exact(b, x); });  // spills are rare: see Expansion::add
}

// One element v into a thread's sums; what an expansion cannot hold, and NaN and infinities, into
// the block's exact sums. Squares: v's square split exactly as h + l (h = v*v rounded, l =
// fma(v, v, -h)), both parts added, as the CPU backend's reduce_squares does (worker/cpu/
// reduce_impl.h: a square that overflowed, or of a NaN or an infinity, is counted and has no l),
// so the two backends sum the same terms and give the same bits.
template <bool Squares>
__device__ __forceinline__ void take(double v, ThreadSums& s, BlockExact& sums, BlockExact& squares) {
  if (fabs(v) <= 1.7976931348623157e308) {
    add_to(s.e, v, sums);
    s.lo = fmin(s.lo, v);
    s.hi = fmax(s.hi, v);
  } else {  // NaN (kept out of min and max) or an infinity
    add_special(sums, v);
    if (v == v) {
      s.lo = fmin(s.lo, v);
      s.hi = fmax(s.hi, v);
    }
  }
  if (Squares) {
    const double h = __dmul_rn(v, v);
    if (fabs(h) <= 1.7976931348623157e308) {
      add_to(s.sq_high, h, squares);
      add_to(s.sq_low, __fma_rn(v, v, -h), squares);
    } else {
      add_special(squares, h);
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

// Thread t of kExactDigits + 3 (t: its index among them) adds one digit or special count of the
// block's sum b to `out` with a global atomic.
__device__ __forceinline__ void flush_exact(const BlockExact& b, uint32_t t, ExactSum& out) {
  if (t < kExactDigits) {
    const unsigned long long d = b.digit[t];
    if (d != 0) atomicAdd(reinterpret_cast<unsigned long long*>(&out.digit[t]), d);
  } else if (t == kExactDigits && b.nan != 0) {
    atomicAdd(&out.nan, b.nan);
  } else if (t == kExactDigits + 1 && b.pos_inf != 0) {
    atomicAdd(&out.pos_inf, b.pos_inf);
  } else if (t == kExactDigits + 2 && b.neg_inf != 0) {
    atomicAdd(&out.neg_inf, b.neg_inf);
  }
}

// The threads of a block that flush its squares (flush_exact) start here.
constexpr uint32_t kSquareFlushThreads = 128;
static_assert(kExactDigits + 4 <= kSquareFlushThreads, "the sum's flush and min/max fit below the squares'");

// Every thread of the block, converged, once it has taken all its elements (t: its linear index):
// the threads' expansions into the block's sums, then the block's digits, special counts, min and
// max into `out` (and its squares' into `squares`) with global atomics (carried first when the
// chunk selects enough elements to need it: carry_blocks).
template <bool Squares, uint32_t Threads>
__device__ __forceinline__ void finish_block(BlockSum<Threads>& b, ThreadSums& s, uint32_t t, bool carry_blocks,
                                             ChunkAccumulator& out, ExactSum* squares) {
  static_assert(!Squares || kSquareFlushThreads + kExactDigits + 3 <= Threads, "a thread per digit of both sums");
  const uint32_t warp = t / 32, lane = t % 32;
  __syncwarp();
  add_exact_warp(b.exact, s.e.hi, lane);
  add_exact_warp(b.exact, s.e.lo, lane);
  if (Squares) {
    add_exact_warp(b.squares, s.sq_high.hi, lane);
    add_exact_warp(b.squares, s.sq_high.lo, lane);
    add_exact_warp(b.squares, s.sq_low.hi, lane);
    add_exact_warp(b.squares, s.sq_low.lo, lane);
  }
  double lo = s.lo, hi = s.hi;
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
  if (Squares && carry_blocks && t == 32) carry_digits(b.squares);
  if (carry_blocks) __syncthreads();

  if (t < kExactDigits + 3) {
    flush_exact(b.exact, t, out.exact);
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
  } else if (Squares && t >= kSquareFlushThreads) {
    flush_exact(b.squares, t - kSquareFlushThreads, *squares);
  }
}

// Turns the accumulators acc[0 .. count) into their results (compact_result, exact_result.h), and
// squares.acc into squares.results when wanted, one thread a chunk (reduce.cu). Throws CudaError
// when the launch fails.
void launch_finalize(uint32_t count, const ChunkAccumulator* acc, ChunkResult* results, SquareOutput squares,
                     cudaStream_t stream);

}  // namespace psched::gpu
