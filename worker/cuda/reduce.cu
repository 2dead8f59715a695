// Reducing chunks on the device (kernels.cuh): one kernel for a big chunk and for a batch of small
// ones. Block (x, z) takes a contiguous run of chunk z's selected elements; each thread keeps a
// TwoSum expansion, min and max (and one of the squares for a var/std job); the block gathers its
// threads' exact sums in shared memory and adds its digits to the chunk's accumulators with global atomics (reduce_block.cuh). Exact
// addition is associative, so neither the order nor the grid shape can change a bit of the result.
// A finalize kernel then carries each chunk's digits and writes its compact ChunkResult.
#include "worker/cuda/kernels.cuh"

#include <algorithm>
#include <type_traits>
#include "core/check.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernel_support.cuh"
#include "worker/cuda/reduce_block.cuh"

namespace psched::gpu {
namespace {

// A stored element's value as a double, exactly as the host widens it (widen_elements): numpy's
// bool is a byte, any nonzero one true.
struct BoolByte {};
template <typename T>
struct StoredAs {
  using Type = T;
  static __device__ double value(const T* p) { return double(__ldg(p)); }
};
template <>
struct StoredAs<BoolByte> {
  using Type = unsigned char;
  static __device__ double value(const unsigned char* p) { return __ldg(p) != 0 ? 1.0 : 0.0; }
};

// Where selected element j (row-major over the chunk's selection) lies in it: row i, column k,
// j = i * sel_cols + k.
struct SelectionPos {
  uint32_t i, k;
};

// A thread takes every kThreads-th selected element, so it divides once (at) and then steps by
// adds and one compare (advance). A division an element was about 25 of a fused element's
// instructions: a fused 10000² chunk took 0.330 ms stepping against 0.348 dividing (one H200).
struct SelectionStep {
  uint32_t rows, cols;  // by / sel_cols and by % sel_cols
  uint32_t sel_cols;
  __device__ SelectionStep(uint32_t by, uint32_t sel_cols_)
      : rows(by / sel_cols_), cols(by - (by / sel_cols_) * sel_cols_), sel_cols(sel_cols_) {}
  __device__ SelectionPos at(uint32_t j) const {
    const uint32_t i = j / sel_cols;
    return SelectionPos{i, j - i * sel_cols};
  }
  __device__ void advance(SelectionPos& p) const {
    p.i += rows;
    p.k += cols;
    if (p.k >= sel_cols) {
      p.k -= sel_cols;
      ++p.i;
    }
  }
};

// The selected element at p of a materialized chunk. All offsets stay
// inside the chunk (< 2^31 elements), so 32-bit arithmetic is exact.
template <typename T>
struct StoredSelection {
  const typename StoredAs<T>::Type* data;
  uint32_t first;       // offset of the first selected element in the chunk
  uint32_t row_stride;  // row_step * box.cols (0 when one row is selected)
  uint32_t col_step;    // 0 when one column is selected
  double scale, offset;

  __device__ double operator()(SelectionPos p) const {
    return mul_add_rounded(scale, StoredAs<T>::value(data + first + p.i * row_stride + p.k * col_step), offset);
  }
};

// The selected element at p generated on the spot, rounded to the stored dtype T as the materialized
// chunk would hold it. `gen` is the launch's own parameter (accumulate_kernel's __grid_constant__
// geometry), read in place: Philox's round keys load from the parameter bank, no local copy. A copy of
// it, as this held before, kept them in registers and local memory (80 registers, 140 bytes
// spilled; 120 now): a fused 10000² chunk 0.197 ms against 0.204, the fused 2 TB job 0.499-0.504 s
// against 0.512-0.517 (one H200, in turns).
template <Generator Kind, typename T>
struct GeneratedSelection {
  const KeyedGenerator& gen;
  uint64_t array_cols;
  uint64_t first_row, first_col;
  uint64_t row_step, col_step;
  double scale, offset;

  __device__ uint64_t index(SelectionPos p) const {
    return (first_row + p.i * row_step) * array_cols + first_col + p.k * col_step;
  }
  __device__ double operator()(SelectionPos p) const {
    const T stored = T(generated<Kind, ElementFormula::kFast>(gen, index(p)));
    return mul_add_rounded(scale, double(stored), offset);
  }
  // operator()(p) into v where the generator's fast path finishes it (element_value_fast_path).
  __device__ bool fast(SelectionPos p, double& v, const ZigguratLayers& layers) const {
    double e;
    if (!element_value_fast_path<Kind>(gen, index(p), e, layers)) return false;
    v = mul_add_rounded(scale, double(T(e)), offset);
    return true;
  }
};

constexpr uint32_t kThreads = 256;
constexpr uint32_t kUnroll = 8;        // loads in flight per thread before they are added
// A var/std job's reading blocks: 4, each element being three expansions' additions. The 2 TB job
// with `--stats sum,var,std`, best runs in turns with 8 on three H200 hosts: 1.260 / 1.285 / 1.280 s
// against 1.269 / 1.297 / 1.292; 2 loads 1.299-1.302, 4 loads in 5 blocks an SM 1.279-1.287, 8 in 3
// blocks 1.301. Sum-only keeps 8: with 4 its job took 1.135 s against 1.125-1.129 (2026-12-01).
constexpr uint32_t kUnrollSquares = 4;
// Elements a thread generates before it adds them, in a fused job: not loads to keep in flight,
// but independent chains to interleave; 4 made a fused 10000² chunk in 0.323 ms against 0.330 for
// 8 and 0.338 / 0.330 for 2 / 1 (one H200, bench/README.md).
constexpr uint32_t kUnrollFused = 4;
// A reading block's registers, sum or var/std: held to 64 (4 blocks of 256 an SM; 136 bytes
// spilled, 280 with squares) rather than the 108 ptxas takes unasked. A generated chunk's reduce
// runs beside the next chunk's generate kernel on another stream, whose two blocks an SM leave
// 20 k of the SM's 64 k registers: a block of 108 never fits there, so the reduce waited for
// generate blocks to end; one of 64 does. The 2 TB job 1.322-1.326 s against 1.367-1.370 unheld
// (in turns, one H200; 80 registers 1.311 against 1.348 in another call; 48 and 32 no better),
// though the reduce alone is slower (0.141 ms a chunk against 0.131). Var/std: 1.651 s against
// 1.689 held to 80 and 1.772 unheld (sum-only 1.515 then): reading is latency-bound, and more
// blocks keep more loads in flight. A fused block, which generates, is held less
// (kFusedBlocksPerSm).
constexpr uint32_t kReadBlocksPerSm = 4;
// A fused block's, sum or var/std: held to 80 (3 blocks an SM, 140 bytes spilled then, 120 now; 280 with
// squares) rather than 108 (2 blocks): the fused 2 TB job 0.711-0.712 s against 0.759-0.760, with
// var and std 0.955 against 1.038; 4 blocks (64 registers) 0.713-0.714 and 0.952 (one H200).
constexpr uint32_t kFusedBlocksPerSm = 3;
// Elements per thread at least, reading a chunk: a block's fixed costs (its shared exact sum started,
// then merged into its chunk's accumulator with global atomics that every block of the chunk
// contends for) need that much work behind them. 16 left a 5000² chunk's reduce at twice its
// bandwidth time; 128 is the best of 16 to 512 at every chunk size measured (more starves batches
// of small chunks of blocks: bench/README.md, "The reduce's least work per thread"). A fused job
// generates its elements in the reduce, which is compute-bound: 16 and 128 measured the same there
// (0.849 s for the 2 TB job either way, bench/README.md), so it keeps 16.
constexpr uint32_t kMinPerThread = 128;
constexpr uint32_t kMinPerThreadFused = 16;
constexpr uint32_t kWaves = 2;          // whole waves of resident blocks per launch

// Element j of chunk z's selection from the launch's buffer.
template <typename T>
struct StoredBatch {
  static constexpr bool kDefers = false;
  static constexpr uint32_t kLeastPerThread = kMinPerThread;
  static constexpr uint32_t kUnrolled = kUnroll;
  static constexpr uint32_t kUnrolledSquares = kUnrollSquares;
  static constexpr uint32_t kBlocksPerSm = kReadBlocksPerSm;
  static constexpr uint32_t kSquaresBlocksPerSm = kReadBlocksPerSm;
  const typename StoredAs<T>::Type* data;
  __device__ StoredSelection<T> for_chunk(const BatchGeometry& g, uint32_t z,
                                          const ChunkSelection& s) const {
    const uint64_t first = (s.rows.first - s.box.row0) * s.box.cols + (s.cols.first - s.box.col0);
    const uint64_t row_stride = s.rows.count > 1 ? g.row_sel.step * s.box.cols : 0;
    const uint64_t col_step = s.cols.count > 1 ? g.col_sel.step : 0;
    return StoredSelection<T>{data + z * g.stride, uint32_t(first), uint32_t(row_stride),
                              uint32_t(col_step), g.scale, g.offset};
  }
};

// Element j of chunk z's selection generated on the spot (fused).
template <Generator Kind, typename T>
struct GeneratedBatch {
  // The normal's elements that its ziggurat's fast path leaves wait for the block's end.
  static constexpr bool kDefers = Kind == Generator::kNormal;
  static constexpr uint32_t kLeastPerThread = kMinPerThreadFused;
  static constexpr uint32_t kUnrolled = kUnrollFused;
  static constexpr uint32_t kUnrolledSquares = kUnrollFused;
  static constexpr uint32_t kBlocksPerSm = kFusedBlocksPerSm;
  static constexpr uint32_t kSquaresBlocksPerSm = kFusedBlocksPerSm;
  __device__ GeneratedSelection<Kind, T> for_chunk(const BatchGeometry& g, uint32_t,
                                                   const ChunkSelection& s) const {
    return GeneratedSelection<Kind, T>{g.gen,        g.grid.cols, s.rows.first,
                                       s.cols.first, s.rows.count > 1 ? g.row_sel.step : 0,
                                       s.cols.count > 1 ? g.col_sel.step : 0, g.scale, g.offset};
  }
};

// A source that defers nothing keeps no deferred places.
struct NoDeferred {};

// Block (x, z) adds chunk z's selected elements [x * per_block, (x + 1) * per_block), thread t
// taking every kThreads-th from the t-th, into acc[z] (and their squares into squares[z]). A
// normal's elements that the ziggurat's fast path leaves are added at the block's end
// (DeferredElements, kernel_support.cuh). The geometry is __grid_constant__: a fused source reads
// its generator there (GeneratedSelection).
template <typename Source, bool Squares>
__global__ void __launch_bounds__(kThreads, Squares ? Source::kSquaresBlocksPerSm : Source::kBlocksPerSm)
    accumulate_kernel(const __grid_constant__ BatchGeometry g, Source source, uint32_t per_thread, bool carry_blocks,
                      ChunkAccumulator* __restrict__ acc, ExactSum* __restrict__ squares) {
  __shared__ BlockSum<kThreads> block;
  __shared__ std::conditional_t<Source::kDefers, DeferredElements, NoDeferred> deferred;
  __shared__ std::conditional_t<Source::kDefers, ZigguratLayers, NoDeferred> layers;
  const uint32_t z = blockIdx.y;
  const ChunkSelection s = selection_of(g, z);
  const uint64_t n = s.count();
  const uint64_t first = uint64_t(blockIdx.x) * per_thread * kThreads;
  if (first >= n) return;  // the whole block
  if constexpr (Source::kDefers) {
    deferred.start(threadIdx.x);
    layers.load(threadIdx.x, kThreads);
  }
  start_block<Squares>(block, threadIdx.x);  // syncs

  const auto element = source.for_chunk(g, z, s);
  const uint64_t block_end = first + uint64_t(per_thread) * kThreads;
  const uint32_t end = uint32_t(block_end < n ? block_end : n);
  ThreadSums sums;
  constexpr uint32_t U = Squares ? Source::kUnrolledSquares : Source::kUnrolled;
  uint32_t j = uint32_t(first) + threadIdx.x;
  const SelectionStep step(kThreads, uint32_t(s.cols.count));
  SelectionPos p = step.at(j);
  for (; j + (U - 1) * kThreads < end; j += U * kThreads) {
    double v[U];
    if constexpr (Source::kDefers) {
      bool done[U];
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) {
        done[u] = element.fast(p, v[u], layers);
        step.advance(p);
      }
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) {
        if (done[u]) {
          take<Squares>(v[u], sums, block.exact, block.squares);
        } else if (!deferred.defer(j + u * kThreads)) {
          take<Squares>(element(step.at(j + u * kThreads)), sums, block.exact, block.squares);
        }
      }
    } else {
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) {
        v[u] = element(p);
        step.advance(p);
      }
#pragma unroll
      for (uint32_t u = 0; u < U; ++u) take<Squares>(v[u], sums, block.exact, block.squares);
    }
  }
  for (; j < end; j += kThreads) {
    take<Squares>(element(p), sums, block.exact, block.squares);
    step.advance(p);
  }
  if constexpr (Source::kDefers) {  // exact sums: the order of the terms changes no bit
    __syncthreads();
    const uint32_t deferred_count = deferred.recorded();
    for (uint32_t k = threadIdx.x; k < deferred_count; k += kThreads)
      take<Squares>(element(step.at(deferred.place[k])), sums, block.exact, block.squares);
  }
  finish_block<Squares>(block, sums, threadIdx.x, carry_blocks, acc[z], Squares ? squares + z : nullptr);
}

// Thread z turns chunk z's accumulator into its result (compact_result, exact_result.h), and its
// squares' when there are any.
__global__ void __launch_bounds__(64)
    finalize_kernel(uint32_t count, const ChunkAccumulator* __restrict__ acc,
                    ChunkResult* __restrict__ out, const ExactSum* __restrict__ squares,
                    CompactExact* __restrict__ square_out) {
  const uint32_t z = blockIdx.x * blockDim.x + threadIdx.x;
  if (z >= count) return;
  out[z] = compact_result(acc[z]);
  if (squares != nullptr) square_out[z] = compact_exact(squares[z]);
}

// Blocks of accumulate_kernel<Source, Squares> one SM holds at once (its registers decide), asked
// once.
template <typename Source, bool Squares>
uint32_t resident_blocks() {
  static const uint32_t blocks = [] {
    int b = 0;
    PSCHED_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &b, accumulate_kernel<Source, Squares>, int(kThreads), 0));
    return uint32_t(std::max(b, 1));
  }();
  return blocks;
}

template <bool Squares, typename Source>
void reduce_with(const BatchWork& b, Source source, ChunkAccumulator* acc, ChunkResult* results,
                 SquareOutput squares, int sm_count, cudaStream_t stream) {
  const uint64_t n = most_selected(b.first);
  PSCHED_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(ChunkAccumulator) * b.count, stream));
  if (Squares) PSCHED_CUDA_CHECK(cudaMemsetAsync(squares.acc, 0, sizeof(ExactSum) * b.count, stream));
  if (n > 0) {
    // kWaves whole waves over the whole launch (the chunks' blocks take equal runs), each
    // thread taking at least Source::kLeastPerThread elements.
    const uint64_t target_threads =
        uint64_t(std::max(sm_count, 1)) * resident_blocks<Source, Squares>() * kWaves * kThreads;
    const uint64_t per_thread = std::max<uint64_t>(
        Source::kLeastPerThread, (n * b.count + target_threads - 1) / target_threads);
    const uint64_t blocks = (n + per_thread * kThreads - 1) / (per_thread * kThreads);
    const dim3 grid{uint32_t(blocks), b.count, 1};
    accumulate_kernel<Source, Squares><<<grid, kThreads, 0, stream>>>(
        batch_geometry(b), source, uint32_t(per_thread), carry_blocks(n, Squares), acc, squares.acc);
    PSCHED_CUDA_CHECK(cudaGetLastError());
  }
  launch_finalize(b.count, acc, results, squares, stream);
}

// The reduction with or without squares, as the job asks.
template <typename Source>
void reduce_with(const BatchWork& b, Source source, ChunkAccumulator* acc, ChunkResult* results,
                 SquareOutput squares, int sm_count, cudaStream_t stream) {
  if (squares.wanted()) reduce_with<true>(b, source, acc, results, squares, sm_count, stream);
  else reduce_with<false>(b, source, acc, results, squares, sm_count, stream);
}

template <typename T>
void reduce_generated(const BatchWork& b, ChunkAccumulator* acc, ChunkResult* results, SquareOutput squares,
                      int sm_count, cudaStream_t stream) {
  auto run = [&](auto source) { reduce_with(b, source, acc, results, squares, sm_count, stream); };
  switch (b.first.gen.kind) {
    case Generator::kNormal: return run(GeneratedBatch<Generator::kNormal, T>{});
    case Generator::kUniform: return run(GeneratedBatch<Generator::kUniform, T>{});
    case Generator::kArange: return run(GeneratedBatch<Generator::kArange, T>{});
    case Generator::kConstant: return run(GeneratedBatch<Generator::kConstant, T>{});
  }
}

}  // namespace

void launch_finalize(uint32_t count, const ChunkAccumulator* acc, ChunkResult* results, SquareOutput squares,
                     cudaStream_t stream) {
  finalize_kernel<<<(count + 63) / 64, 64, 0, stream>>>(count, acc, results, squares.acc, squares.results);
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

void launch_reduce(const BatchWork& b, const void* buffer, ChunkAccumulator* acc,
                   ChunkResult* results, int sm_count, cudaStream_t stream, SquareOutput squares) {
  PSCHED_REQUIRE(b.count > 0 && b.count <= kMaxBatchChunks, b.count);
  // validate() bounds a chunk to kMaxChunkElements (2^31) elements, so selections fit 32 bits.
  PSCHED_REQUIRE(most_selected(b.first) <= kMaxChunkElements, most_selected(b.first));
  const bool f64 = b.first.dtype == DType::kFloat64;
  if (b.first.fused) {
    if (f64) reduce_generated<double>(b, acc, results, squares, sm_count, stream);
    else reduce_generated<float>(b, acc, results, squares, sm_count, stream);
    return;
  }
  auto stored = [&](auto type) {  // type: a null T*
    using T = std::remove_pointer_t<decltype(type)>;
    using Data = const typename StoredAs<T>::Type*;
    reduce_with(b, StoredBatch<T>{static_cast<Data>(buffer)}, acc, results, squares, sm_count, stream);
  };
  // Generated chunks are float64 or float32; a stored array's may be any dtype the device widens
  // itself (chunk_reader.h's stored_on_device), the rest arrive widened to float64.
  switch (b.first.dtype) {
    case DType::kFloat64: return stored((double*)nullptr);
    case DType::kFloat32: return stored((float*)nullptr);
    case DType::kInt8: return stored((signed char*)nullptr);
    case DType::kInt16: return stored((short*)nullptr);
    case DType::kInt32: return stored((int*)nullptr);
    case DType::kUInt8: return stored((unsigned char*)nullptr);
    case DType::kUInt16: return stored((unsigned short*)nullptr);
    case DType::kUInt32: return stored((unsigned int*)nullptr);
    case DType::kBool: return stored((BoolByte*)nullptr);
    case DType::kInt64:
    case DType::kUInt64: break;
  }
  PSCHED_REQUIRE(false, int(b.first.dtype));  // widened on the host: a caller's bug
}

}  // namespace psched::gpu
