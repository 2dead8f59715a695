// The device work of chunks: create them in device memory (the DeepOps benchmark's "create data"), then
// reduce the selected elements of scale * x + offset to their exact sum, min and max; or, fused,
// generate only the selected elements and reduce them without storing anything. Big chunks go one
// at a time; small chunks go as batches of consecutive chunks of one job, each batch one generate
// launch and one reduction with one result per chunk (generate.cu, reduce.cu). Host-side launchers only, no kernel syntax, so g++ code can include this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/chunk_grid.h"
#include "core/generators.h"
#include "core/job_spec.h"
#include "worker/cuda/batching.h"
#include "worker/cuda/exact_result.h"
#include "worker/cuda/fast_generators.h"

namespace psched::gpu {

// Everything the kernels need to know about one chunk of a job, worked out on the host.
struct ChunkWork {
  KeyedGenerator gen{};
  DType dtype = DType::kFloat64;
  bool fused = false;
  uint64_t array_cols = 0;   // global linear index = r * array_cols + c
  ChunkBox box;              // the chunk in global coordinates
  AxisRun rows, cols;        // its selected rows and columns (global first, count)
  uint64_t row_step = 1, col_step = 1;
  // Where the chunk lies in its job (batches find their other chunks' boxes from these).
  ChunkGrid grid;
  uint64_t chunk = 0;
  Slice row_sel, col_sel;    // the job's selection (normalized)
  double scale = 1.0, offset = 0.0;

  uint64_t selected() const { return rows.count * cols.count; }
  uint64_t element_bytes() const { return psched::element_bytes(dtype); }
  // Bytes the materialized chunk occupies (the box, which is smaller than a full chunk at edges).
  uint64_t box_bytes() const { return box.rows * box.cols * element_bytes(); }
};

// spec must be validated and normalized.
ChunkWork chunk_work(const JobSpec& spec, uint64_t chunk);

// A batch: `count` consecutive chunks of one job starting at first.chunk, chunk i's box stored
// row-major at element offset i * stride_elements of one buffer (a full chunk's elements).
struct BatchWork {
  ChunkWork first;
  uint32_t count = 1;
  uint64_t stride_elements = 0;
};

// Each launcher's arguments are the backend's to get right (batches of 1 to kMaxBatchChunks
// chunks, at most kMaxChunkElements elements per chunk): a violation is a bug, so it fails a
// PSCHED_REQUIRE (core/check.h) and the worker stops, rather than a chunk failing and another
// worker hiding the bug by retrying it.

// kFast evaluates elements with fast_generators.h (32-bit Philox multiplies, one thread per normal
// pair); kReference evaluates core/generators.h's element_value() verbatim. Both give the CPU
// reference's bits. The backend uses kFast; the floor benchmark measures both.
enum class ElementFormula { kFast, kReference };

// Writes the box's elements, row-major, as work.dtype into buffer (work.box_bytes() bytes).
// sm_count sizes the grid. Throws CudaError when the launch fails.
void launch_generate(const ChunkWork& work, void* buffer, int sm_count, cudaStream_t stream,
                     ElementFormula formula = ElementFormula::kFast);
// The same for every chunk of a batch, in one launch.
void launch_generate_batch(const BatchWork& batch, void* buffer, int sm_count, cudaStream_t stream);

// Reduces every chunk of the batch (count 1 for a big chunk; work.first.fused: straight from the
// generator, buffer unused; else from buffer as launch_generate(_batch) left it) into acc[0 ..
// count) and then results[0 .. count) (exact_result.h): min, max as before, and the sum exact. Any order
// gives the same exact sum, so blocks and threads take elements in whatever order is fastest, and
// a chunk's result never depends on its batch. Chunks with an empty selection get sum 0, min
// +inf, max -inf. With `squares` wanted (a var/std job), the same pass also sums each selected
// element's square, exactly split in two (reduce_block.cuh's take), into squares.acc[0 .. count)
// and then squares.results. sm_count sizes the grid. Throws CudaError when a launch fails.
void launch_reduce(const BatchWork& batch, const void* buffer, ChunkAccumulator* acc,
                   ChunkResult* results, int sm_count, cudaStream_t stream, SquareOutput squares = {});

// Test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK): a kernel that executes a trap instruction, leaving the
// context with a sticky error, as a hardware fault or a bad kernel would.
void launch_trap(cudaStream_t stream);

}  // namespace psched::gpu
