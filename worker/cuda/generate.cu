// Generation and reduction kernels of the CUDA backend (see kernels.cuh). Element values come from
// common/generators.h, the code the CPU backend runs, in the device-tuned forms of
// fast_generators.h: arange, constant and uniform (and everything under the explicitly rounded
// expression) are bit-identical to the CPU reference, normal values agree to rounding.
#include "worker/cuda/kernels.cuh"

#include <algorithm>
#include <limits>

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "worker/cuda/check.h"
#include "worker/cuda/fast_generators.h"

namespace psched::gpu {
namespace {

constexpr int kNormal = int(Generator::kNormal);
constexpr int kUniform = int(Generator::kUniform);
constexpr int kArange = int(Generator::kArange);
constexpr int kConstant = int(Generator::kConstant);

// The element at a global linear index, with the generator kind fixed at compile time.
template <int Kind, ElementFormula Formula>
__device__ __forceinline__ double generated(const GeneratorParams& g, uint64_t index) {
  if constexpr (Formula == ElementFormula::kFast) {
    return element_value_fast<Kind>(g, index);
  } else {
    GeneratorParams fixed = g;
    fixed.kind = uint8_t(Kind);
    return element_value(fixed, index);
  }
}

// ---- create the chunk ----------------------------------------------------------------------

struct GenerateGeometry {
  GeneratorParams gen;
  uint64_t array_cols;
  uint64_t row0, col0;
  uint32_t box_rows, box_cols;
};

// 2-D blocks: x runs along a row (consecutive threads write consecutive elements), y over rows;
// each thread then steps down the rows by the grid's height, so a grid of a few waves covers any
// chunk and the row's global base index is one multiply per row.
template <int Kind, ElementFormula Formula, typename T>
__global__ void __launch_bounds__(256) generate_kernel(GenerateGeometry g, T* __restrict__ out) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= g.box_cols) return;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  for (uint32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < g.box_rows; r += row_stride) {
    const uint64_t index = (g.row0 + r) * g.array_cols + g.col0 + c;
    out[uint64_t(r) * g.box_cols + c] = T(generated<Kind, Formula>(g.gen, index));
  }
}

// normal: one thread per Box-Muller pair (global elements 2m, 2m + 1), writing both of its elements
// that fall in the chunk: half the Philox blocks and logs of one thread per element. Pair slot p of
// a row is pair (base >> 1) + p, where base is the global index of the row's first chunk element.
template <typename T>
__global__ void __launch_bounds__(256) generate_normal_pairs_kernel(GenerateGeometry g,
                                                                     T* __restrict__ out) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  for (uint32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < g.box_rows; r += row_stride) {
    const uint64_t base = (g.row0 + r) * g.array_cols + g.col0;
    const uint64_t pair = (base >> 1) + p;
    const int64_t c_even = int64_t(2 * pair - base);  // -1 when the row starts on an odd index
    if (c_even >= int64_t(g.box_cols)) continue;
    const NormalPair z = standard_normal_pair_fast(g.gen.seed, pair);
    T* row = out + uint64_t(r) * g.box_cols;
    if (c_even >= 0) row[c_even] = T(mul_add_rounded(g.gen.param1, z.even, g.gen.param0));
    if (c_even + 1 < int64_t(g.box_cols))
      row[c_even + 1] = T(mul_add_rounded(g.gen.param1, z.odd, g.gen.param0));
  }
}

template <int Kind, ElementFormula Formula>
void launch_generate_as(const ChunkWork& w, void* buffer, dim3 grid, dim3 block,
                        cudaStream_t stream) {
  const GenerateGeometry g{w.gen, w.array_cols, w.box.row0, w.box.col0, uint32_t(w.box.rows),
                           uint32_t(w.box.cols)};
  if (w.dtype == DType::kFloat64) {
    generate_kernel<Kind, Formula, double>
        <<<grid, block, 0, stream>>>(g, static_cast<double*>(buffer));
  } else {
    generate_kernel<Kind, Formula, float>
        <<<grid, block, 0, stream>>>(g, static_cast<float*>(buffer));
  }
}

// ---- reduce the selection --------------------------------------------------------------------

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
template <int Kind, typename T>
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

template <int Kind, typename T>
GeneratedSelection<Kind, T> generated_selection(const ChunkWork& w) {
  return GeneratedSelection<Kind, T>{w.gen,       w.array_cols, w.rows.first,
                                     w.cols.first, w.rows.count > 1 ? w.row_step : 0,
                                     w.cols.count > 1 ? w.col_step : 0,
                                     uint32_t(w.cols.count), w.scale, w.offset};
}

template <typename T, typename Visit>
void visit_generated(const ChunkWork& w, Visit&& visit) {
  switch (w.gen.kind) {
    case kNormal: visit(selection_iterator(generated_selection<kNormal, T>(w))); return;
    case kUniform: visit(selection_iterator(generated_selection<kUniform, T>(w))); return;
    case kArange: visit(selection_iterator(generated_selection<kArange, T>(w))); return;
    default: visit(selection_iterator(generated_selection<kConstant, T>(w))); return;
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

constexpr SelectionStats kEmptyStats{0.0, std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity()};

uint32_t selected_items(const ChunkWork& w) {
  // validate() bounds a chunk to kMaxChunkElements (2^31) elements, so the selection fits 32 bits.
  if (w.selected() == 0 || w.selected() > kMaxChunkElements)
    throw std::invalid_argument("reduce: selection of " + std::to_string(w.selected()) +
                                " elements is outside (0, 2^31]");
  return uint32_t(w.selected());
}

}  // namespace

ChunkWork chunk_work(const JobSpec& s, uint64_t chunk) {
  ChunkWork w;
  w.gen = GeneratorParams{uint8_t(s.generator), s.param0, s.param1, s.seed};
  w.dtype = s.dtype;
  w.fused = s.fused;
  w.array_cols = s.cols;
  w.box = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.box(chunk);
  w.rows = select_axis(w.box.row0, w.box.row0 + w.box.rows, s.row_sel.start, s.row_sel.stop,
                       s.row_sel.step);
  w.cols = select_axis(w.box.col0, w.box.col0 + w.box.cols, s.col_sel.start, s.col_sel.stop,
                       s.col_sel.step);
  w.row_step = s.row_sel.step;
  w.col_step = s.col_sel.step;
  w.scale = s.scale;
  w.offset = s.offset;
  return w;
}

void launch_generate(const ChunkWork& w, void* buffer, int sm_count, cudaStream_t stream,
                     ElementFormula formula) {
  if (w.box.rows == 0 || w.box.cols == 0) return;
  if (w.box.rows * w.box.cols > kMaxChunkElements)
    throw std::invalid_argument("generate: chunk of " + std::to_string(w.box.rows * w.box.cols) +
                                " elements is over 2^31");
  // Block: 256 threads, as wide as the row allows (a power of two), the rest stacked over rows so
  // narrow chunks still write contiguous memory with full blocks.
  uint32_t bx = 1;
  while (bx < 256 && bx < w.box.cols) bx *= 2;
  const uint32_t by = 256 / bx;
  const uint64_t grid_x = (w.box.cols + bx - 1) / bx;
  const uint64_t row_blocks = (w.box.rows + by - 1) / by;
  // About 32 blocks per SM: whole waves for any occupancy that divides 32, each block looping
  // over rows, so the tail of the last wave is at most one row per block.
  const uint64_t target_blocks = uint64_t(std::max(sm_count, 1)) * 32;
  uint64_t grid_y = std::max<uint64_t>(1, target_blocks / grid_x);
  grid_y = std::min<uint64_t>({grid_y, row_blocks, 65535});
  const dim3 grid{uint32_t(grid_x), uint32_t(grid_y), 1};
  const dim3 block{bx, by, 1};

  const bool reference = formula == ElementFormula::kReference;
  if (w.gen.kind == kNormal && !reference) {
    // Pair slots per row: at most cols / 2 + 1 (a row may start and end half way through a pair).
    const uint64_t pairs = w.box.cols / 2 + 1;
    uint32_t px = 1;
    while (px < 256 && px < pairs) px *= 2;
    const uint32_t py = 256 / px;
    const uint64_t pgrid_x = (pairs + px - 1) / px;
    const uint64_t prow_blocks = (w.box.rows + py - 1) / py;
    uint64_t pgrid_y = std::max<uint64_t>(1, target_blocks / pgrid_x);
    pgrid_y = std::min<uint64_t>({pgrid_y, prow_blocks, 65535});
    const GenerateGeometry g{w.gen, w.array_cols, w.box.row0, w.box.col0, uint32_t(w.box.rows),
                             uint32_t(w.box.cols)};
    const dim3 pgrid{uint32_t(pgrid_x), uint32_t(pgrid_y), 1};
    const dim3 pblock{px, py, 1};
    if (w.dtype == DType::kFloat64) {
      generate_normal_pairs_kernel<double><<<pgrid, pblock, 0, stream>>>(g, static_cast<double*>(buffer));
    } else {
      generate_normal_pairs_kernel<float><<<pgrid, pblock, 0, stream>>>(g, static_cast<float*>(buffer));
    }
    PSCHED_CUDA_CHECK(cudaGetLastError());
    return;
  }
  switch (w.gen.kind) {
    case kNormal:
      if (reference)
        launch_generate_as<kNormal, ElementFormula::kReference>(w, buffer, grid, block, stream);
      else
        launch_generate_as<kNormal, ElementFormula::kFast>(w, buffer, grid, block, stream);
      break;
    case kUniform:
      if (reference)
        launch_generate_as<kUniform, ElementFormula::kReference>(w, buffer, grid, block, stream);
      else
        launch_generate_as<kUniform, ElementFormula::kFast>(w, buffer, grid, block, stream);
      break;
    case kArange:  // element_value() itself: nothing to tune
      launch_generate_as<kArange, ElementFormula::kReference>(w, buffer, grid, block, stream);
      break;
    default:
      launch_generate_as<kConstant, ElementFormula::kReference>(w, buffer, grid, block, stream);
      break;
  }
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

namespace {
__global__ void trap_kernel() { __trap(); }
}  // namespace

void launch_trap(cudaStream_t stream) {
  trap_kernel<<<1, 1, 0, stream>>>();
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

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

}  // namespace psched::gpu
