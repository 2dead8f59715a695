// Creating chunks in device memory (kernels.cuh): one launch writes one chunk, or every chunk of a
// batch (grid z = the chunk within the batch). Element values come from core/generators.h, the
// code the CPU backend runs, in the device-tuned forms of fast_generators.h: every generator is
// bit-identical to the CPU reference, float32 being the float64 element rounded to nearest.
#include "worker/cuda/kernels.cuh"

#include <algorithm>
#include <cstdint>
#include "core/check.h"
#include "worker/cuda/check.h"
#include "worker/cuda/fast_generators.h"
#include "worker/cuda/kernel_support.cuh"

namespace psched::gpu {
namespace {

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

// Two adjacent elements of type T as one aligned store.
template <typename T>
struct Pair;
template <>
struct Pair<double> {
  using Type = double2;
  static __device__ __forceinline__ double2 make(double a, double b) { return make_double2(a, b); }
};
template <>
struct Pair<float> {
  using Type = float2;
  static __device__ __forceinline__ float2 make(float a, float b) { return make_float2(a, b); }
};

// normal: pairs (global elements 2m, 2m + 1, one Philox block), each thread making both elements
// of kPairs pairs of a row that fall in the box: half the Philox blocks of one thread per element.
// Pair slot p of a row is pair (base >> 1) + p, where base is the global index of the row's first
// box element; a thread takes slots p, p + W, p + 2W, ... (W: the grid's width in threads), so a
// warp's stores stay contiguous, and its pairs are independent chains the scheduler interleaves.
// Each element is the ziggurat's fast path; the ~0.7 % it leaves are deferred (`deferred`: the
// block's DeferredElements or the warp's WarpDeferred). A thread computes all kPairs even where the
// last ones fall past the row. Passes [first_pass, end_pass) of the thread's rows (pass k: its row
// r0 + k x the grid's rows of threads), so that the deferred elements can be finished between
// them; kEveryPass: all of them (the passes given are not read).
template <int kPairs, bool kEveryPass, typename T, typename Deferred>
__device__ __forceinline__ void make_normal_pairs(const KeyedGenerator& gen, const ChunkBox& box, uint64_t array_cols,
                                                  T* __restrict__ out, Deferred& deferred, bool& dropped,
                                                  uint32_t first_pass, uint32_t end_pass) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t slot_stride = gridDim.x * blockDim.x;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  // An element the fast path left goes to the block's end; when the block's places are full, the
  // thread makes all its elements again at the end (redo_normal_pairs).
  auto defer = [&](uint32_t where) {
    if (!deferred.defer(where)) dropped = true;
  };
  // Columns in 32 bits (a box has at most 2^31 elements, kMaxChunkElements), held one past the
  // pair's even element so that they never go below 0: e = c_even + 1, where c_even is -1 when the
  // row starts on an odd index. Slot k's e is the row's e0 + 2 k W, below cols + 2^11 + 3. In 64
  // bits, with the alignment tested for every pair, the 2 TB job took 1.186-1.199 s against
  // 1.168-1.188 and float32 1.015-1.021 against 0.967-0.977 (one H200, in turns).
  const uint32_t cols = uint32_t(box.cols);
  const uint32_t r0 = blockIdx.y * blockDim.y + threadIdx.y;
  const uint32_t row_end =
      kEveryPass ? uint32_t(box.rows) : uint32_t(min(box.rows, uint64_t(r0) + uint64_t(end_pass) * row_stride));
  for (uint32_t r = kEveryPass ? r0 : r0 + first_pass * row_stride; r < row_end; r += row_stride) {
    const uint64_t base = (box.row0 + r) * array_cols + box.col0;
    const uint64_t first = (base >> 1) + p;
    const uint32_t e0 = uint32_t(2 * first - base) + 1;
    if (e0 > cols) continue;  // every slot past the row
    const uint32_t row_at = r * cols;  // < 2^31
    // Every slot of the row has the first one's parity, so one test says whether its pairs are
    // aligned for a pair store (modulo 2^64: e0 - 1 may be -1).
    const bool aligned =
        (reinterpret_cast<uintptr_t>(out) + (uint64_t(row_at) + e0 - 1) * sizeof(T)) % sizeof(typename Pair<T>::Type) == 0;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const uint64_t pair = first + uint64_t(k) * slot_stride;
      const NormalPair z = normal_pair_fast_path(gen, pair);
      const uint32_t e = e0 + 2 * uint32_t(k) * slot_stride;
      const uint32_t where = row_at + e - 1;  // the even element's place: < 2^31, or r cols - 1
      const T even = T(scale_normal(gen.param1, z.even, gen.param0));
      const T odd = T(scale_normal(gen.param1, z.odd, gen.param0));
      const bool even_in = e - 1 < cols;  // 0 <= c_even < cols (e = 0 wraps to the largest value)
      const bool odd_in = e < cols;       // c_even + 1 < cols
      if (aligned && even_in && odd_in) {
        // Both elements, one 16-byte (float32: 8-byte) store: a warp writes whole sectors, where
        // two 8-byte stores each wrote half of every sector (twice the L2 traffic). A deferred
        // element's place is written again at the block's end.
        *reinterpret_cast<typename Pair<T>::Type*>(out + where) = Pair<T>::make(even, odd);
        if (!z.even_done) defer(where);
        if (!z.odd_done) defer(where + 1);
        continue;
      }
      if (even_in) {
        if (z.even_done) out[where] = even;
        else defer(where);
      }
      if (odd_in) {
        if (z.odd_done) out[where + 1] = odd;
        else defer(where + 1);
      }
    }
  }
}

// The elements a block or a warp deferred (make_normal_pairs): its `threads` threads take every
// threads-th place, from their own `thread` (the block's: the thread in the block; a warp's: the
// lane).
template <typename T, typename Deferred>
__device__ __forceinline__ void finish_deferred_normals(const KeyedGenerator& gen, const ChunkBox& box,
                                                        uint64_t array_cols, T* __restrict__ out,
                                                        const Deferred& deferred, uint32_t thread, uint32_t threads) {
  const uint32_t n = deferred.recorded();
  for (uint32_t k = thread; k < n; k += threads) {
    const uint32_t where = deferred.at(k);
    const uint32_t r = where / box.cols, c = where - r * box.cols;
    const uint64_t index = (box.row0 + r) * array_cols + box.col0 + c;
    out[where] = T(scale_normal(gen.param1, standard_normal_fast(gen, index), gen.param0));
  }
}

// Every element make_normal_pairs gave this thread, made whole (fast path and slow path in place):
// for a thread whose block ran out of places (DeferredElements::kCapacity). launch_normal_pairs_by
// gives a block at most kMostPerBlock elements where the grid allows (about 0.7 % of them
// deferred: 233 expected against 2048 places), but this must be right when it happens. Apart from
// the main loop, with its own few live values, so the slow path's registers do not weigh on the
// loop that runs every element. Its slot loop is make_normal_pairs' own, written again: one
// function calling a lambda for both made the 2 TB job 0.3-0.5 % slower on an H200 (1.353-1.357
// against 1.347-1.354 s, in turns; float32 2 % faster, 92 registers against 88).
template <int kPairs, typename T>
__device__ __noinline__ void redo_normal_pairs(const KeyedGenerator& gen, const ChunkBox& box, uint64_t array_cols,
                                               T* __restrict__ out) {
  const uint32_t p = blockIdx.x * blockDim.x + threadIdx.x;
  const uint32_t slot_stride = gridDim.x * blockDim.x;
  const uint32_t row_stride = gridDim.y * blockDim.y;
  for (uint32_t r = blockIdx.y * blockDim.y + threadIdx.y; r < box.rows; r += row_stride) {
    const uint64_t base = (box.row0 + r) * array_cols + box.col0;
    for (int k = 0; k < kPairs; ++k) {
      const uint64_t pair = (base >> 1) + p + uint64_t(k) * slot_stride;
      for (uint64_t index = 2 * pair; index < 2 * pair + 2; ++index) {
        const int64_t c = int64_t(index - base);
        if (c >= 0 && c < int64_t(box.cols))
          out[uint64_t(r) * box.cols + c] = T(scale_normal(gen.param1, standard_normal_fast(gen, index), gen.param0));
      }
    }
  }
}

// A launch shape for `count` boxes of at most rows x cols elements: blocks of 256 threads as wide
// as the row allows (a power of two; the rest stacked over rows so narrow chunks still write
// contiguous memory with full blocks), or narrower down to a warp where that leaves fewer threads
// idle; about 32 blocks per SM in all (whole waves for any occupancy that divides 32, each block
// looping over rows, so the tail of the last wave is at most one row per block).
struct LaunchShape {
  dim3 grid, block;
};

// Threads blocks bx wide lay over rows x cols: whole blocks along a row, whole block heights
// (256 / bx rows) down the columns.
inline uint64_t threads_laid(uint64_t rows, uint64_t cols, uint32_t bx) {
  const uint64_t by = 256 / bx;
  return (cols + bx - 1) / bx * bx * ((rows + by - 1) / by * by);
}

inline LaunchShape shape_for(uint64_t rows, uint64_t cols, uint32_t count, int sm_count) {
  uint32_t bx = 1;
  while (bx < 256 && bx < cols) bx *= 2;
  // Narrower blocks where they leave fewer threads idle: 626 threads a row take 768 in blocks of
  // 256, 640 in blocks of 128 over two rows.
  for (uint32_t w = bx / 2; w >= 32; w /= 2)
    if (threads_laid(rows, cols, w) < threads_laid(rows, cols, bx)) bx = w;
  const uint32_t by = 256 / bx;
  const uint64_t grid_x = (cols + bx - 1) / bx;
  const uint64_t row_blocks = (rows + by - 1) / by;
  const uint64_t target_blocks = uint64_t(std::max(sm_count, 1)) * 32;
  uint64_t grid_y = std::max<uint64_t>(1, target_blocks / (grid_x * count));
  grid_y = std::min<uint64_t>({grid_y, row_blocks, 65535});
  return LaunchShape{dim3{uint32_t(grid_x), uint32_t(grid_y), count}, dim3{bx, by, 1}};
}

// What a generate launch needs: the job's grid and generator, and which chunks (blockIdx.z picks
// chunk first_chunk + z, stored at element z * stride of the buffer).
struct GenerateGeometry {
  KeyedGenerator gen;
  ChunkGrid grid;
  uint64_t first_chunk;
  uint64_t stride;
};

// Each thread makes its elements (the loops above) and only writes them.
template <Generator Kind, ElementFormula Formula, typename T>
__global__ void __launch_bounds__(256) generate_kernel(GenerateGeometry g, T* __restrict__ out) {
  const ChunkBox box = g.grid.box(g.first_chunk + blockIdx.z);
  make_elements<Kind, Formula>(g.gen, box, g.grid.cols, out + blockIdx.z * g.stride);
}

// normal: every thread makes its pairs, deferring what the fast path leaves, and the deferred
// elements are finished together. A deferred element is written long after its pair: finished only
// at the block's end, the L2 had often written its sector back to DRAM by then, and the 8-byte store
// left it a part of a sector, which with ECC it can only write back by reading the sector from DRAM
// first, at random places (no deferred element written at all, a timing with wrong sums: a 10000²
// chunk in 0.316 ms against 0.372, the 2 TB job 1.064 s against 1.15-1.18; one H200).
// - float64: each warp keeps its own list (WarpDeferred) and finishes it every kFinishPairs pairs a
//   thread (6 passes over the rows in four pairs a thread) with __syncwarp alone, the block's
//   other warps running on. One H200, in turns with a block-wide list finished half way through
//   the block's passes (two barriers each): a 10000² chunk 0.329 ms against 0.345, the 2 TB job
//   1.118-1.122 s against 1.142-1.150, in 5000² / 2000² / 1000² / 500² chunks 1.175 / 1.151 /
//   1.155 / 1.176 s against 1.204 / 1.179 / 1.188 / 1.197. The warp finishing every 5 passes:
//   0.345 ms, 7: 0.332-0.334, 8: 0.336-0.337, 12 (once a block): 0.357, 3: 0.363, 2: 0.397 (each
//   finish a round of the slow path with few lanes busy; late finishes find fewer sectors in the
//   L2). The block-wide list before it: finished at the block's end only, 0.371 ms (the 2 TB job
//   1.152-1.156 s); every third pass 0.369, every second 0.396 (most warps waiting at each finish).
// - float32 writes half the bytes, so its sectors are still in the L2 at its block's end: it keeps
//   the block-wide list finished once. Per warp every 6 or 12 passes, its 2 TB job took
//   0.979-0.988 s against 0.963-0.964; finished twice block-wide, 1.000-1.016 against 0.953-0.956.
// - The geometry is __grid_constant__: the slow paths' calls (redo_normal_pairs, not inlined) take
//   the generator by reference, and a plain parameter whose address is taken is copied to each
//   thread's local memory first. ptxas then held Philox's round keys in 20 registers loaded from
//   there (88 registers, and local memory traffic); read in place, they are loaded from the
//   parameter bank, with no local copy (78 registers; 80 since the columns went to 32 bits, the
//   main loop keeping the keys in registers, the slow path in uniform ones). A 10000² chunk:
//   0.374 ms against 0.432, the 2 TB job 1.16-1.19 s against 1.29-1.31 (one H200, in turns,
//   bench/README.md).
// - float64's registers held for 3 blocks an SM (80, 8 bytes spilled): with a finish inside the
//   pass loop ptxas took 88-90 unheld, two blocks an SM (float32 keeps its one finish and its 78,
//   budgeted for 2 blocks as before: 3 anyway). Before that, unheld, the kernel took 78-80 registers
//   (3 blocks): asking for 3 then took 0.376 ms against 0.374, 4 (64, 28 bytes spilled) 0.438, and
//   90-94 registers (2 blocks) 0.384 against 0.372 (bench/README.md, "The generate kernel's
//   deferred tail"): keep it at 80 or fewer.
template <int kPairs, typename T>
__global__ void __launch_bounds__(256, sizeof(T) == 8 ? 3 : 2)
    generate_normal_pairs_kernel(const __grid_constant__ GenerateGeometry g, T* __restrict__ out) {
  bool dropped = false;
  if constexpr (sizeof(T) == 8) {
    constexpr uint32_t kFinishPairs = 24;
    constexpr uint32_t kPassesPerFinish = kFinishPairs / kPairs;
    __shared__ WarpDeferredElements lists;
    const uint32_t thread = threadIdx.y * blockDim.x + threadIdx.x;
    WarpDeferred deferred{lists, thread / 32};
    const uint32_t lane = thread % 32;
    deferred.start(lane);
    __syncwarp();
    const ChunkBox box = g.grid.box(g.first_chunk + blockIdx.z);
    T* chunk = out + blockIdx.z * g.stride;
    // The block's passes over its rows (its first row of threads makes the most): the same count
    // for every thread, so that all lanes of a warp reach each __syncwarp.
    const uint32_t row_stride = gridDim.y * blockDim.y;
    const uint32_t block_row = blockIdx.y * blockDim.y;
    const uint32_t passes = box.rows > block_row ? uint32_t((box.rows - block_row + row_stride - 1) / row_stride) : 0;
    for (uint32_t pass = 0; pass < passes; pass += kPassesPerFinish) {
      make_normal_pairs<kPairs, false>(g.gen, box, g.grid.cols, chunk, deferred, dropped, pass,
                                       pass + kPassesPerFinish);
      __syncwarp();
      finish_deferred_normals(g.gen, box, g.grid.cols, chunk, deferred, lane, 32);
      __syncwarp();  // every place read before lane 0 clears the list
      deferred.start(lane);
      __syncwarp();
    }
    if (dropped) redo_normal_pairs<kPairs>(g.gen, box, g.grid.cols, chunk);
  } else {
    // The thread's number taken again where it is used (held through the loop, it cost float32
    // two registers).
    __shared__ DeferredElements deferred;
    deferred.start(threadIdx.y * blockDim.x + threadIdx.x);
    __syncthreads();
    const ChunkBox box = g.grid.box(g.first_chunk + blockIdx.z);
    T* chunk = out + blockIdx.z * g.stride;
    make_normal_pairs<kPairs, true>(g.gen, box, g.grid.cols, chunk, deferred, dropped, 0, 0);
    __syncthreads();
    finish_deferred_normals(g.gen, box, g.grid.cols, chunk, deferred, threadIdx.y * blockDim.x + threadIdx.x,
                            blockDim.x * blockDim.y);
    if (dropped) redo_normal_pairs<kPairs>(g.gen, box, g.grid.cols, chunk);
  }
}

// Of rows x `slots` pair slots, the share a launch of `pairs` a thread makes: the threads
// shape_for's blocks lay over them, each making `pairs` pairs.
double made_per_slot(uint64_t rows, uint64_t slots, uint64_t pairs) {
  const uint64_t threads = (slots + pairs - 1) / pairs;
  const LaunchShape s = shape_for(rows, threads, 1, 1);
  return double(threads_laid(rows, threads, s.block.x) * pairs) / double(rows * slots);
}

template <int kPairs>
void launch_normal_pairs_by(const GenerateGeometry& g, DType dtype, void* buffer, uint64_t rows, uint64_t slots,
                            uint32_t count, int sm_count, cudaStream_t stream) {
  LaunchShape s = shape_for(rows, (slots + kPairs - 1) / kPairs, count, sm_count);
  // The float64 kernel's deferred places are laid out for blocks of 256 threads: a list for each
  // of WarpDeferredElements' 8 warps.
  PSCHED_REQUIRE(s.block.x * s.block.y == WarpDeferredElements::kWarps * 32, s.block.x, s.block.y);
  // The rows of blocks are not shape_for's (about 32 blocks an SM): a block ends in its deferred
  // tail, a round or two of the slow path with most of its warps done, while it holds one of the
  // SM's three places, so a block wants many elements. A block's pass over its rows makes 2 kPairs
  // elements a thread; it makes kAimPasses of them (24576 elements), never more than kMostPerBlock
  // in all (so its deferred elements fit its places), in at least 4 blocks an SM. One H200, the
  // 2 TB job against 32 blocks an SM: 5000² chunks 1.41 s against 1.67, batches of 2000² 1.39
  // against 1.57 and of 500² 1.44 against 1.56; 10000² 1.35 either way (2^15 elements a block
  // took 1.36: 11.8 waves of two blocks an SM where 24576 make 15.8).
  constexpr uint64_t kMostPerBlock = uint64_t{1} << 15;
  constexpr uint64_t kAimPasses = kMostPerBlock / (256 * 2 * kPairs) * 3 / 4;
  const uint64_t aim_y = (rows + s.block.y * kAimPasses - 1) / (s.block.y * kAimPasses);
  const uint64_t fill_y = (uint64_t(std::max(sm_count, 1)) * 4 + s.grid.x * count - 1) / (s.grid.x * count);
  const uint64_t row_blocks = (rows + s.block.y - 1) / s.block.y;
  s.grid.y = uint32_t(std::min<uint64_t>({65535, row_blocks, std::max(aim_y, fill_y)}));
  if (dtype == DType::kFloat64) {
    generate_normal_pairs_kernel<kPairs, double><<<s.grid, s.block, 0, stream>>>(g, static_cast<double*>(buffer));
  } else {
    generate_normal_pairs_kernel<kPairs, float><<<s.grid, s.block, 0, stream>>>(g, static_cast<float*>(buffer));
  }
}

// Four pairs a thread, or two, or one: the most that makes at most 5 % more pairs than the rows
// have slots (a 5000-column chunk's 2501 slots a row in 768 threads of four, three blocks of 256,
// would make 23 % more, and its 2 TB job took 1.19 x the 10000² one; in 640 threads of four,
// five blocks of 128 over two rows, 2.4 %).
void launch_normal_pairs(const GenerateGeometry& g, DType dtype, void* buffer, uint64_t rows, uint64_t cols,
                         uint32_t count, int sm_count, cudaStream_t stream) {
  // Pair slots per row: at most cols / 2 + 1 (a row may start and end half way through a pair).
  const uint64_t slots = cols / 2 + 1;
  constexpr double kMostMade = 1.05;
  if (made_per_slot(rows, slots, 4) <= kMostMade)
    launch_normal_pairs_by<4>(g, dtype, buffer, rows, slots, count, sm_count, stream);
  else if (made_per_slot(rows, slots, 2) <= kMostMade)
    launch_normal_pairs_by<2>(g, dtype, buffer, rows, slots, count, sm_count, stream);
  else
    launch_normal_pairs_by<1>(g, dtype, buffer, rows, slots, count, sm_count, stream);
}

template <Generator Kind, ElementFormula Formula>
void launch_generate_as(const GenerateGeometry& g, DType dtype, void* buffer,
                        const LaunchShape& s, cudaStream_t stream) {
  if (dtype == DType::kFloat64) {
    generate_kernel<Kind, Formula, double>
        <<<s.grid, s.block, 0, stream>>>(g, static_cast<double*>(buffer));
  } else {
    generate_kernel<Kind, Formula, float>
        <<<s.grid, s.block, 0, stream>>>(g, static_cast<float*>(buffer));
  }
}

// arange and constant have nothing to tune: element_value() itself is their fast form.
template <Generator Kind>
void launch_generate_kind(const GenerateGeometry& g, DType dtype, void* buffer, const LaunchShape& s,
                          cudaStream_t stream, bool reference) {
  if constexpr (Kind == Generator::kArange || Kind == Generator::kConstant) {
    launch_generate_as<Kind, ElementFormula::kReference>(g, dtype, buffer, s, stream);
  } else if (reference) {
    launch_generate_as<Kind, ElementFormula::kReference>(g, dtype, buffer, s, stream);
  } else {
    launch_generate_as<Kind, ElementFormula::kFast>(g, dtype, buffer, s, stream);
  }
}

// Generates `count` chunks starting at w.chunk; rows x cols bound every box.
void generate(const ChunkWork& w, uint32_t count, uint64_t stride, uint64_t rows, uint64_t cols,
              void* buffer, int sm_count, cudaStream_t stream, ElementFormula formula) {
  if (rows == 0 || cols == 0) return;
  PSCHED_REQUIRE(rows * cols <= kMaxChunkElements, rows, cols);
  PSCHED_REQUIRE(count > 0 && count <= kMaxBatchChunks, count);
  const GenerateGeometry g{w.gen, w.grid, w.chunk, stride};
  const bool reference = formula == ElementFormula::kReference;
  if (w.gen.kind == Generator::kNormal && !reference) {
    launch_normal_pairs(g, w.dtype, buffer, rows, cols, count, sm_count, stream);
    PSCHED_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const LaunchShape s = shape_for(rows, cols, count, sm_count);
  switch (w.gen.kind) {
    case Generator::kNormal:
      launch_generate_kind<Generator::kNormal>(g, w.dtype, buffer, s, stream, reference);
      break;
    case Generator::kUniform:
      launch_generate_kind<Generator::kUniform>(g, w.dtype, buffer, s, stream, reference);
      break;
    case Generator::kArange:
      launch_generate_kind<Generator::kArange>(g, w.dtype, buffer, s, stream, reference);
      break;
    case Generator::kConstant:
      launch_generate_kind<Generator::kConstant>(g, w.dtype, buffer, s, stream, reference);
      break;
  }
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

__global__ void trap_kernel() { __trap(); }

}  // namespace

ChunkWork chunk_work(const JobSpec& s, uint64_t chunk) {
  ChunkWork w;
  w.gen = keyed(GeneratorParams{s.generator, s.param0, s.param1, s.seed});
  w.dtype = s.dtype;
  w.fused = s.fused;
  w.array_cols = s.cols;
  w.grid = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols};
  w.chunk = chunk;
  w.box = w.grid.box(chunk);
  w.row_sel = s.row_sel;
  w.col_sel = s.col_sel;
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
  generate(w, 1, 0, w.box.rows, w.box.cols, buffer, sm_count, stream, formula);
}

void launch_generate_batch(const BatchWork& b, void* buffer, int sm_count, cudaStream_t stream) {
  const ChunkGrid& grid = b.first.grid;
  generate(b.first, b.count, b.stride_elements, std::min(grid.chunk_rows, grid.rows),
           std::min(grid.chunk_cols, grid.cols), buffer, sm_count, stream, ElementFormula::kFast);
}

void launch_trap(cudaStream_t stream) {
  trap_kernel<<<1, 1, 0, stream>>>();
  PSCHED_CUDA_CHECK(cudaGetLastError());
}

}  // namespace psched::gpu
