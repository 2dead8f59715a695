// The device work of chunks: create them in device memory (the DeepOps benchmark's "create data"), then
// reduce the selected elements of scale * x + offset to sum, min and max; or, fused, generate only
// the selected elements and reduce them without storing anything. Big chunks go one at a time
// (CUB's reduction over the chunk); small chunks go as batches of consecutive chunks of one job,
// each batch one generate launch and one tiled reduction with one result per chunk (generate.cu,
// reduce.cu). Host-side launchers only, no kernel syntax, so g++ code can include this header.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "common/chunk_grid.h"
#include "common/generators.h"
#include "common/job_spec.h"
#include "worker/cuda/batching.h"

namespace psched::gpu {

// Everything the kernels need to know about one chunk of a job, worked out on the host.
struct ChunkWork {
  GeneratorParams gen{};
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

// What the device reduction yields; the count is the closed form rows.count * cols.count.
struct SelectionStats {
  double sum;
  double min;
  double max;
};

// kFast evaluates elements with fast_generators.h (32-bit Philox multiplies, one thread per normal
// pair); kReference evaluates common/generators.h's element_value() verbatim. Both give the CPU
// reference's bits. The backend uses kFast; the floor benchmark measures both.
enum class ElementFormula { kFast, kReference };

// Writes the box's elements, row-major, as work.dtype into buffer (work.box_bytes() bytes).
// sm_count sizes the grid. Throws CudaError when the launch fails.
void launch_generate(const ChunkWork& work, void* buffer, int sm_count, cudaStream_t stream,
                     ElementFormula formula = ElementFormula::kFast);
// The same for every chunk of a batch, in one launch.
void launch_generate_batch(const BatchWork& batch, void* buffer, int sm_count, cudaStream_t stream);

// CUB temporary storage launch_reduce needs for this work (work.selected() > 0).
size_t reduce_temp_bytes(const ChunkWork& work);

// Reduces the selection (work.selected() > 0) into *d_stats (device memory): from buffer, as
// launch_generate left it, or, when work.fused, straight from the generator (buffer unused).
// temp_bytes >= reduce_temp_bytes(work). Throws CudaError when the launch fails.
void launch_reduce(const ChunkWork& work, const void* buffer, void* temp, size_t temp_bytes,
                   SelectionStats* d_stats, cudaStream_t stream);

// The batched reduction: each chunk's selection is cut into tiles of kTileElements selected
// elements (a fixed number of threads, a fixed order within each), the tiles' results are combined
// by a fixed tree, and chunk i's result lands in d_stats[i]. The order depends on the chunk's
// selection alone, never on the batch. Scratch memory for the tiles' results:
constexpr uint32_t kTileElements = 4096;
size_t batch_scratch_bytes(const BatchWork& batch);
// From buffer as launch_generate_batch left it, or, when batch.first.fused, from the generator.
// Chunks with an empty selection get the empty stats (sum 0, min +inf, max -inf).
void launch_reduce_batch(const BatchWork& batch, const void* buffer, void* scratch,
                         SelectionStats* d_stats, cudaStream_t stream);

// Test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK): a kernel that executes a trap instruction, leaving the
// context with a sticky error, as a hardware fault or a bad kernel would.
void launch_trap(cudaStream_t stream);

}  // namespace psched::gpu
