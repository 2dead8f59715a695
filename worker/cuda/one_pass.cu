// Making chunks in one pass (kernels.cuh, launch_generate_reduce): each thread generates its
// elements of the chunk as generate.cu does (the same launch shape, the same element forms),
// writes them, and adds the selected ones, as stored, to its TwoSum expansion from registers; the
// block then adds its threads' sums to the chunk's accumulator as reduce.cu's blocks do
// (reduce_block.cuh). So the chunk is written once and never read back: the two-kernel path's
// second pass over HBM is gone. Exact addition is associative, so the results have the two-kernel
// path's bits whatever the grid (tests/gpu/cuda_one_pass_test.cpp).
#include "worker/cuda/kernels.cuh"

#include <algorithm>
#include "core/check.h"
#include "worker/cuda/axis_pick.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/reduce_block.cuh"

namespace psched::gpu {
namespace {

constexpr uint32_t kThreads = 256;  // shape_for's blocks

// Each thread makes its elements with generate.cu's loops (kernel_support.cuh) and adds the
// selected ones. make_normal_pairs for normal (one thread per Box-Muller pair), make_elements for
// uniform, arange and constant.
template <Generator Kind, typename T, bool Squares>
__global__ void __launch_bounds__(kThreads)
    generate_reduce_kernel(BatchGeometry g, T* __restrict__ out, bool carry_blocks,
                           ChunkAccumulator* __restrict__ acc, ExactSum* __restrict__ squares) {
  __shared__ BlockSum<kThreads> block;
  const uint32_t t = threadIdx.y * blockDim.x + threadIdx.x;
  start_block<Squares>(block, t);
  const uint32_t z = blockIdx.z;
  const ChunkSelection s = selection_of(g, z);
  const AxisPick row_pick = pick_of(s.rows, s.box.row0, g.row_sel.step);
  const AxisPick col_pick = pick_of(s.cols, s.box.col0, g.col_sel.step);
  ThreadSums sums;
  const double scale = g.scale, offset = g.offset;
  BlockSum<kThreads>* const shared = &block;  // a __shared__ variable cannot be captured
  // Per row: whether it is selected (once), then per element its column. The picks by value, so
  // that nothing the loops store can alias them.
  const auto add = [=, &sums](uint32_t r) {
    const bool row_selected = row_pick(r);
    return [=, &sums](uint32_t c, T x) {
      if (row_selected && col_pick(c))
        take<Squares>(mul_add_rounded(scale, double(x), offset), sums, shared->exact, shared->squares);
    };
  };
  // The loops return, not the kernel: every thread of the block finishes it.
  if constexpr (Kind == Generator::kNormal) make_normal_pairs(g.gen, s.box, g.grid.cols, out + z * g.stride, add);
  else make_elements<Kind, ElementFormula::kFast>(g.gen, s.box, g.grid.cols, out + z * g.stride, add);
  finish_block<Squares>(block, sums, t, carry_blocks, acc[z], Squares ? squares + z : nullptr);
}

template <typename T, bool Squares>
void generate_reduce_with(const BatchWork& b, T* buffer, ChunkAccumulator* acc, ExactSum* squares, int sm_count,
                        cudaStream_t stream) {
  const ChunkGrid& grid = b.first.grid;
  const uint64_t rows = std::min(grid.chunk_rows, grid.rows), cols = std::min(grid.chunk_cols, grid.cols);
  const BatchGeometry g = batch_geometry(b);
  const bool carry = carry_blocks(most_selected(b.first), Squares);
  const LaunchShape s = shape_for(rows, cols, b.count, sm_count);
  switch (b.first.gen.kind) {
    case Generator::kNormal: {
      // Pair slots per row: at most cols / 2 + 1 (a row may start and end half way through a pair).
      const LaunchShape pairs = shape_for(rows, cols / 2 + 1, b.count, sm_count);
      generate_reduce_kernel<Generator::kNormal, T, Squares>
          <<<pairs.grid, pairs.block, 0, stream>>>(g, buffer, carry, acc, squares);
      break;
    }
    case Generator::kUniform:
      generate_reduce_kernel<Generator::kUniform, T, Squares>
          <<<s.grid, s.block, 0, stream>>>(g, buffer, carry, acc, squares);
      break;
    case Generator::kArange:
      generate_reduce_kernel<Generator::kArange, T, Squares>
          <<<s.grid, s.block, 0, stream>>>(g, buffer, carry, acc, squares);
      break;
    case Generator::kConstant:
      generate_reduce_kernel<Generator::kConstant, T, Squares>
          <<<s.grid, s.block, 0, stream>>>(g, buffer, carry, acc, squares);
      break;
  }
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void generate_reduce_as(const BatchWork& b, T* buffer, ChunkAccumulator* acc, SquareOutput squares, int sm_count,
                        cudaStream_t stream) {
  if (squares.wanted()) generate_reduce_with<T, true>(b, buffer, acc, squares.acc, sm_count, stream);
  else generate_reduce_with<T, false>(b, buffer, acc, nullptr, sm_count, stream);
}

}  // namespace

void launch_generate_reduce(const BatchWork& b, void* buffer, ChunkAccumulator* acc, ChunkResult* results,
                            int sm_count, cudaStream_t stream, SquareOutput squares) {
  PSCHED_REQUIRE(!b.first.fused);  // a fused job writes no chunk
  PSCHED_REQUIRE(b.count > 0 && b.count <= kMaxBatchChunks, b.count);
  const ChunkGrid& grid = b.first.grid;
  const uint64_t rows = std::min(grid.chunk_rows, grid.rows), cols = std::min(grid.chunk_cols, grid.cols);
  PSCHED_REQUIRE(rows * cols <= kMaxChunkElements, rows, cols);
  PSCHED_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(ChunkAccumulator) * b.count, stream));
  if (squares.wanted()) PSCHED_CUDA_CHECK(cudaMemsetAsync(squares.acc, 0, sizeof(ExactSum) * b.count, stream));
  if (b.first.dtype == DType::kFloat64) {
    generate_reduce_as(b, static_cast<double*>(buffer), acc, squares, sm_count, stream);
  } else {
    generate_reduce_as(b, static_cast<float*>(buffer), acc, squares, sm_count, stream);
  }
  launch_finalize(b.count, acc, results, squares, stream);
}

}  // namespace psched::gpu
