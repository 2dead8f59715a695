// cuda-floor's command line and report (bench/cuda_floor.cu measures): the options, what each
// measurement returns, and the key=value lines and the line for people that print them, with the
// roofline: each way of making a chunk as a fraction of the HBM write limit measured in the run.
// Host code only.
#pragma once

#include <cstdint>
#include <string>

#include "core/job_spec.h"
#include "worker/cuda/cuda_backend.h"

namespace psched::cuda_floor {

struct Args {
  int device = 0;
  int iterations = 20;
  uint64_t chunk_rows = 10000, chunk_cols = 10000;
  uint64_t chunks = 0;  // > 0: also run this many chunks through CudaBackend
  bool fused = false;   // the backend run uses fused chunks
  int streams = CudaBackendOptions{}.streams;  // the worker's default
  uint64_t batch_side = 0;  // > 0: also time one batch of batch_side^2 chunks (batched kernels)
};

[[noreturn]] void usage(const char* why);
Args parse(int argc, char** argv);
// The DeepOps benchmark's job in the chunks --chunk asks for (validated and normalized).
JobSpec deepops_benchmark_job(const Args& a);

// One chunk's kernels, in ms (bench/cuda_floor.cu, measure_floor).
struct Floor {
  double generate_ms, generate_reference_ms, generate_uniform_ms, generate_arange_ms;
  double generate_cuda_libm_ms, reduce_ms, sum_only_ms, floor_ms, fused_ms;
  double copy_tb_per_s, cub_sum_ms, cub_sum_tb_per_s, mean;
};

// One batch of the backend's size for SIDE^2 chunks of the same job: the batched generate and
// exact reduce kernels alone, per 1e8 elements, to set beside the 10000^2 floor.
struct BatchFloor {
  uint32_t chunks = 0;
  double generate_ms = 0, reduce_ms = 0, total_ms = 0, ms_per_1e8 = 0;
  // Copying the batch's results to pinned host memory: the compact ChunkResults the backend
  // copies, and what full accumulators (an ExactSum per chunk) would cost instead.
  double copy_results_ms = 0, copy_full_ms = 0;
};

struct BackendRun {
  double ms_per_chunk = 0, busy_ms_per_chunk = 0, mean = 0;
  uint64_t failed = 0;
  std::string first_error;
};

void print_floor(const char* device, const JobSpec& spec, const Args& args, const Floor& f);
void print_batch(const JobSpec& spec, const Floor& f, const BatchFloor& b, uint64_t batch_side);
void print_backend(const Args& args, const Floor& f, const BackendRun& run);
// The roofline: write-only (arange), uniform, normal generation, the two-kernel chunk (generate and
// reduce), fused, and the backend per chunk (when run: null otherwise), each as
// the write-only time over its own, so 1.0 is at the HBM write limit of this GPU as measured in the
// run.
void print_roofline(const Floor& f, const BackendRun* run);
// The line for people.
void print_summary(const char* device, const Args& args, const Floor& f, const BackendRun* run);

}  // namespace psched::cuda_floor
