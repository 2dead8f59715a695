// Reducing chunks on the device (kernels.cuh). One big chunk: CUB's DeviceReduce over a transform
// iterator that yields the chunk's selected elements. A batch of small chunks: a tiled reduction
// with one block per (tile, chunk) and one block per chunk to combine its tiles, both in a fixed
// order, so a chunk's result depends on its selection alone.
#include "worker/cuda/kernels.cuh"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "worker/cuda/check.h"
#include "worker/cuda/kernel_support.cuh"

namespace psched::gpu {
namespace {

constexpr SelectionStats kEmptyStats{0.0, std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity()};

// ---- one chunk, CUB -----------------------------------------------------------------------------

// Selected element j (row-major over the selection) of a materialized chunk. All offsets stay
// inside the chunk (< 2^31 elements), so 32-bit arithmetic is exact.
template <typename T>
struct StoredSelection {
  const T* data;
  uint32_t first;       // offset of the first selected element in the chunk
  uint32_t row_stride;  // row_step * box.cols (0 when one row is selected)
  uint32_t col_step;    // 0 when one column is selected
  uint32_t sel_cols;
  double scale, offset;

  __device__ SelectionStats operator()(uint32_t j) const {
    const uint32_t i = j / sel_cols;
    const uint32_t k = j - i * sel_cols;
    return stats_of(scale, double(__ldg(data + first + i * row_stride + k * col_step)), offset);
  }
};

// Selected element j generated on the spot, rounded to the stored dtype T as the materialized
// chunk would hold it.
template <Generator Kind, typename T>
struct GeneratedSelection {
  GeneratorParams gen;
  uint64_t array_cols;
  uint64_t first_row, first_col;
  uint64_t row_step, col_step;
  uint32_t sel_cols;
  double scale, offset;

  __device__ SelectionStats operator()(uint32_t j) const {
    const uint32_t i = j / sel_cols;
    const uint32_t k = j - i * sel_cols;
    const uint64_t index = (first_row + i * row_step) * array_cols + first_col + k * col_step;
    const T stored = T(generated<Kind, ElementFormula::kFast>(gen, index));
    return stats_of(scale, double(stored), offset);
  }
};

template <typename Functor>
auto selection_iterator(Functor f) {
  return thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0), f);
}

template <typename T>
StoredSelection<T> stored_selection(const ChunkWork& w, const void* buffer) {
  const uint64_t first =
      (w.rows.first - w.box.row0) * w.box.cols + (w.cols.first - w.box.col0);
  const uint64_t row_stride = w.rows.count > 1 ? w.row_step * w.box.cols : 0;
  const uint64_t col_step = w.cols.count > 1 ? w.col_step : 0;
  return StoredSelection<T>{static_cast<const T*>(buffer), uint32_t(first), uint32_t(row_stride),
                            uint32_t(col_step), uint32_t(w.cols.count), w.scale, w.offset};
}

template <Generator Kind, typename T>
GeneratedSelection<Kind, T> generated_selection(const ChunkWork& w) {
  return GeneratedSelection<Kind, T>{w.gen,       w.array_cols, w.rows.first,
                                     w.cols.first, w.rows.count > 1 ? w.row_step : 0,
                                     w.cols.count > 1 ? w.col_step : 0,
                                     uint32_t(w.cols.count), w.scale, w.offset};
}

template <typename T, typename Visit>
void visit_generated(const ChunkWork& w, Visit&& visit) {
  switch (w.gen.kind) {
    case Generator::kNormal:
      visit(selection_iterator(generated_selection<Generator::kNormal, T>(w)));
      return;
    case Generator::kUniform:
      visit(selection_iterator(generated_selection<Generator::kUniform, T>(w)));
      return;
    case Generator::kArange:
      visit(selection_iterator(generated_selection<Generator::kArange, T>(w)));
      return;
    case Generator::kConstant:
      visit(selection_iterator(generated_selection<Generator::kConstant, T>(w)));
      return;
  }
}

// Calls visit(iterator) with the input iterator of this work's selection; one place that decides
// which of the reduce instantiations a chunk uses, for sizing and for running alike.
template <typename Visit>
void visit_selection(const ChunkWork& w, const void* buffer, Visit&& visit) {
  if (w.fused) {
    if (w.dtype == DType::kFloat64) visit_generated<double>(w, visit);
    else visit_generated<float>(w, visit);
  } else if (w.dtype == DType::kFloat64) {
    visit(selection_iterator(stored_selection<double>(w, buffer)));
  } else {
    visit(selection_iterator(stored_selection<float>(w, buffer)));
  }
}

uint32_t selected_items(const ChunkWork& w) {
  // validate() bounds a chunk to kMaxChunkElements (2^31) elements, so the selection fits 32 bits.
  if (w.selected() == 0 || w.selected() > kMaxChunkElements)
    throw std::invalid_argument("reduce: selection of " + std::to_string(w.selected()) +
                                " elements is outside (0, 2^31]");
  return uint32_t(w.selected());
}

// ---- a batch of chunks, tiled ----------------------------------------------------------------

constexpr uint32_t kThreads = 256;
constexpr uint32_t kPerThread = kTileElements / kThreads;

// The job's geometry as the batch kernels see it; chunk z of the batch is first_chunk + z.
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

__device__ ChunkSelection selection_of(const BatchGeometry& g, uint32_t z) {
  ChunkSelection s;
  s.box = g.grid.box(g.first_chunk + z);
  s.rows = select_axis(s.box.row0, s.box.row0 + s.box.rows, g.row_sel.start, g.row_sel.stop,
                       g.row_sel.step);
  s.cols = select_axis(s.box.col0, s.box.col0 + s.box.cols, g.col_sel.start, g.col_sel.stop,
                       g.col_sel.step);
  return s;
}

// Element j of chunk z's selection from the batch's buffer.
template <typename T>
struct StoredBatch {
  const T* data;
  __device__ StoredSelection<T> for_chunk(const BatchGeometry& g, uint32_t z,
                                          const ChunkSelection& s) const {
    const uint64_t first = (s.rows.first - s.box.row0) * s.box.cols + (s.cols.first - s.box.col0);
    const uint64_t row_stride = s.rows.count > 1 ? g.row_sel.step * s.box.cols : 0;
    const uint64_t col_step = s.cols.count > 1 ? g.col_sel.step : 0;
    return StoredSelection<T>{data + z * g.stride, uint32_t(first), uint32_t(row_stride),
                              uint32_t(col_step), uint32_t(s.cols.count), g.scale, g.offset};
  }
};

// Element j of chunk z's selection generated on the spot (fused).
template <Generator Kind, typename T>
struct GeneratedBatch {
  __device__ GeneratedSelection<Kind, T> for_chunk(const BatchGeometry& g, uint32_t,
                                                   const ChunkSelection& s) const {
    return GeneratedSelection<Kind, T>{g.gen,        g.grid.cols, s.rows.first,
                                       s.cols.first, s.rows.count > 1 ? g.row_sel.step : 0,
                                       s.cols.count > 1 ? g.col_sel.step : 0,
                                       uint32_t(s.cols.count), g.scale, g.offset};
  }
};

__device__ __forceinline__ SelectionStats shuffle_down(const SelectionStats& v, int delta) {
  return SelectionStats{__shfl_down_sync(0xffffffffu, v.sum, delta),
                        __shfl_down_sync(0xffffffffu, v.min, delta),
                        __shfl_down_sync(0xffffffffu, v.max, delta)};
}

// The block's values combined by a fixed tree (lane i takes lane i + d, for d = 16 .. 1, in each
// warp; then the warps' results the same way); the result is valid in thread 0.
__device__ SelectionStats block_combine(SelectionStats v) {
  __shared__ SelectionStats warp_stats[kThreads / 32];
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) v = StatsOp{}(v, shuffle_down(v, d));
  if (lane == 0) warp_stats[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? warp_stats[lane] : kEmptyStats;
#pragma unroll
    for (int d = kThreads / 64; d > 0; d /= 2) v = StatsOp{}(v, shuffle_down(v, d));
  }
  return v;
}

// Block (t, z) reduces tile t of chunk z: selected elements t * kTileElements + m * kThreads + tid
// for m = 0 .. kPerThread - 1, each thread in order of m, then block_combine. With one tile per
// chunk (the job's chunks hold at most kTileElements elements) the tile is the chunk's result and
// goes to out[z]; otherwise to tiles[z * tiles_per_chunk + t].
template <typename Source>
__global__ void __launch_bounds__(kThreads)
    tile_kernel(BatchGeometry g, Source source, uint32_t tiles_per_chunk, bool one_tile,
                SelectionStats* __restrict__ out) {
  const uint32_t z = blockIdx.y, t = blockIdx.x;
  const ChunkSelection s = selection_of(g, z);
  const uint64_t n = s.count();
  const uint64_t first = uint64_t(t) * kTileElements;
  SelectionStats* dest = one_tile ? out + z : out + uint64_t(z) * tiles_per_chunk + t;
  if (first >= n) {
    if (one_tile && t == 0 && threadIdx.x == 0) *dest = kEmptyStats;
    return;
  }
  const auto element = source.for_chunk(g, z, s);
  SelectionStats acc = kEmptyStats;
  if (first + kTileElements <= n) {
#pragma unroll
    for (uint32_t m = 0; m < kPerThread; ++m)
      acc = StatsOp{}(acc, element(uint32_t(first + m * kThreads + threadIdx.x)));
  } else {
    for (uint32_t m = 0; m < kPerThread; ++m) {
      const uint64_t j = first + m * kThreads + threadIdx.x;
      if (j < n) acc = StatsOp{}(acc, element(uint32_t(j)));
    }
  }
  acc = block_combine(acc);
  if (threadIdx.x == 0) *dest = acc;
}

// Block z combines chunk z's tiles: thread i takes tiles i, i + kThreads, ... in order, then
// block_combine.
__global__ void __launch_bounds__(kThreads)
    combine_tiles_kernel(BatchGeometry g, const SelectionStats* __restrict__ tiles,
                         uint32_t tiles_per_chunk, SelectionStats* __restrict__ out) {
  const uint32_t z = blockIdx.x;
  const uint64_t n = selection_of(g, z).count();
  const uint32_t n_tiles = uint32_t((n + kTileElements - 1) / kTileElements);
  SelectionStats acc = kEmptyStats;
  for (uint32_t t = threadIdx.x; t < n_tiles; t += kThreads)
    acc = StatsOp{}(acc, tiles[uint64_t(z) * tiles_per_chunk + t]);
  acc = block_combine(acc);
  if (threadIdx.x == 0) out[z] = acc;
}

// At most ceil(length / step) indices of a window of `length` are selected.
uint64_t most_selected(uint64_t length, uint64_t step) {
  return length / step + (length % step != 0 ? 1 : 0);
}

// Tiles a full chunk of the job may need: the bound for every chunk of the batch.
uint32_t tiles_per_chunk(const BatchWork& b) {
  const ChunkGrid& grid = b.first.grid;
  const uint64_t rows = std::min(grid.chunk_rows, grid.rows);
  const uint64_t cols = std::min(grid.chunk_cols, grid.cols);
  const uint64_t n = most_selected(rows, b.first.row_sel.step) *
                     most_selected(cols, b.first.col_sel.step);
  return uint32_t(std::max<uint64_t>(1, (n + kTileElements - 1) / kTileElements));
}

// One tile per chunk whatever the selection: decided by the job's chunk size alone.
bool one_tile(const BatchWork& b) {
  return b.first.grid.chunk_rows * b.first.grid.chunk_cols <= kTileElements;
}

BatchGeometry batch_geometry(const BatchWork& b) {
  const ChunkWork& w = b.first;
  return BatchGeometry{w.gen, w.grid, w.row_sel, w.col_sel, w.chunk, b.stride_elements,
                       w.scale, w.offset};
}

template <typename Source>
void reduce_batch_with(const BatchWork& b, Source source, void* scratch, SelectionStats* d_stats,
                       cudaStream_t stream) {
  const BatchGeometry g = batch_geometry(b);
  const uint32_t tiles = tiles_per_chunk(b);
  const bool single = one_tile(b);
  const dim3 grid{tiles, b.count, 1};
  SelectionStats* tile_out = single ? d_stats : static_cast<SelectionStats*>(scratch);
  tile_kernel<<<grid, kThreads, 0, stream>>>(g, source, tiles, single, tile_out);
  PSCHED_CUDA_CHECK(cudaGetLastError());
  if (single) return;
  combine_tiles_kernel<<<b.count, kThreads, 0, stream>>>(g, tile_out, tiles, d_stats);
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void reduce_generated_batch(const BatchWork& b, void* scratch, SelectionStats* d_stats,
                            cudaStream_t stream) {
  auto run = [&](auto source) { reduce_batch_with(b, source, scratch, d_stats, stream); };
  switch (b.first.gen.kind) {
    case Generator::kNormal: return run(GeneratedBatch<Generator::kNormal, T>{});
    case Generator::kUniform: return run(GeneratedBatch<Generator::kUniform, T>{});
    case Generator::kArange: return run(GeneratedBatch<Generator::kArange, T>{});
    case Generator::kConstant: return run(GeneratedBatch<Generator::kConstant, T>{});
  }
}

}  // namespace

size_t reduce_temp_bytes(const ChunkWork& w) {
  const uint32_t n = selected_items(w);
  size_t bytes = 0;
  visit_selection(w, nullptr, [&](auto in) {
    PSCHED_CUDA_CHECK(cub::DeviceReduce::Reduce(nullptr, bytes, in,
                                                static_cast<SelectionStats*>(nullptr), n,
                                                StatsOp{}, kEmptyStats));
  });
  return bytes;
}

void launch_reduce(const ChunkWork& w, const void* buffer, void* temp, size_t temp_bytes,
                   SelectionStats* d_stats, cudaStream_t stream) {
  const uint32_t n = selected_items(w);
  visit_selection(w, buffer, [&](auto in) {
    PSCHED_CUDA_CHECK(cub::DeviceReduce::Reduce(temp, temp_bytes, in, d_stats, n, StatsOp{},
                                                kEmptyStats, stream));
  });
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

size_t batch_scratch_bytes(const BatchWork& b) {
  if (one_tile(b)) return 0;
  return size_t(b.count) * tiles_per_chunk(b) * sizeof(SelectionStats);
}

void launch_reduce_batch(const BatchWork& b, const void* buffer, void* scratch,
                         SelectionStats* d_stats, cudaStream_t stream) {
  if (b.count == 0 || b.count > kMaxBatchChunks)
    throw std::invalid_argument("reduce: batch of " + std::to_string(b.count) + " chunks");
  const bool f64 = b.first.dtype == DType::kFloat64;
  if (b.first.fused) {
    if (f64) reduce_generated_batch<double>(b, scratch, d_stats, stream);
    else reduce_generated_batch<float>(b, scratch, d_stats, stream);
  } else if (f64) {
    reduce_batch_with(b, StoredBatch<double>{static_cast<const double*>(buffer)}, scratch, d_stats,
                      stream);
  } else {
    reduce_batch_with(b, StoredBatch<float>{static_cast<const float*>(buffer)}, scratch, d_stats,
                      stream);
  }
}

}  // namespace psched::gpu
