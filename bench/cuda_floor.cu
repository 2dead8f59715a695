// cuda-floor: what one chunk of the DeepOps benchmark (10000 x 10000 float64, normal(10, 1),
// (x + 1)[::2, ::2]) costs on this GPU with nothing but the kernels: generate, the backend's exact
// strided reduce, both (the floor), fused, plus copy, cub::DeviceReduce::Sum bandwidth and a plain
// (inexact) CUB strided sum for reference. With --chunks N
// it also runs N chunks through the real CudaBackend (no scheduler, no network) and prints the
// per-chunk time against the floor measured in the same run. Output (cuda_floor_cli.cpp):
// key=value lines, the roofline (each way of making a chunk as a fraction of the HBM write limit
// measured here), then one line for people. No CUDA device: prints SKIP and exits 0.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <cub/device/device_reduce.cuh>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include "bench/cuda_floor.h"
#include "worker/cuda/check.h"
#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/fast_generators.h"
#include "worker/cuda/kernels.cuh"

using namespace psched;
using namespace psched::cuda_floor;

namespace {


// Milliseconds per call of fn, on stream, over a.iterations after two warm-up calls.
template <typename Fn>
double time_ms(cudaStream_t stream, int iterations, Fn&& fn) {
  cudaEvent_t start, stop;
  PSCHED_CUDA_CHECK(cudaEventCreate(&start));
  PSCHED_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 2; ++i) fn();
  PSCHED_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int i = 0; i < iterations; ++i) fn();
  PSCHED_CUDA_CHECK(cudaEventRecord(stop, stream));
  PSCHED_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  PSCHED_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  PSCHED_CUDA_CHECK(cudaEventDestroy(start));
  PSCHED_CUDA_CHECK(cudaEventDestroy(stop));
  return double(ms) / iterations;
}

// The GPU.md reference measurement: sum only (no min/max) of (x + 1)[::2, ::2] through a CUB
// transform iterator, to compare with the backend's sum+min+max reduce.
struct StridedPlusOne {
  const double* data;
  uint32_t sel_cols, row_stride;
  __device__ double operator()(uint32_t j) const {
    const uint32_t i = j / sel_cols, k = j - i * sel_cols;
    return __dadd_rn(__ldg(data + i * row_stride + 2 * k), 1.0);
  }
};

// A peer for the shared element definition (core/generators.h: a ziggurat in explicitly rounded
// doubles, the same bits as the CPU): Box-Muller pairs (one Philox block per pair, (2m, 2m+1) taking
// cos and sin, written as double2) with CUDA's own log, sqrt and sincospi, FMA-contracted, as the
// generator did before it had a shared definition (and as cuRAND's normal2_double does). Chunk 0 of an array with an even number of columns only.
__global__ void __launch_bounds__(256)
    generate_cuda_libm_kernel(gpu::KeyedGenerator gen, uint64_t array_cols, uint32_t rows,
                              uint32_t pair_cols, double2* __restrict__ out) {
  const uint32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= pair_cols) return;
  for (uint32_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const uint64_t pair = (uint64_t(r) * array_cols) / 2 + c;
    const UniformPair u = gpu::uniform_pair_fast(gen.keys, pair);
    const double radius = sqrt(-2.0 * log(1.0 - u.u0));
    double s, co;
    sincospi(2.0 * u.u1, &s, &co);
    out[uint64_t(r) * pair_cols + c] =
        make_double2(scale_normal(gen.param1, radius * co, gen.param0),
                     scale_normal(gen.param1, radius * s, gen.param0));
  }
}

// The rounded exact sum of a finished reduction of one chunk.
double exact_sum_of(const gpu::ChunkAccumulator* acc, const gpu::ChunkResult* result) {
  gpu::ChunkResult r{};
  gpu::ChunkAccumulator wide{};
  PSCHED_CUDA_CHECK(cudaMemcpy(&r, result, sizeof(r), cudaMemcpyDeviceToHost));
  PSCHED_CUDA_CHECK(cudaMemcpy(&wide, acc, sizeof(wide), cudaMemcpyDeviceToHost));
  return gpu::exact_from(r, &wide).rounded();
}


// The generator's other forms beside the one the floor uses: the reference formula, uniform,
// arange, and the normal pairs with CUDA's math library instead of the shared definition.
void time_generator_variants(const gpu::ChunkWork& work, void* buffer, int sm_count,
                             cudaStream_t stream, int it, Floor& f) {
  f.generate_reference_ms = time_ms(stream, it, [&] {
    gpu::launch_generate(work, buffer, sm_count, stream, gpu::ElementFormula::kReference);
  });
  gpu::ChunkWork uniform = work;
  uniform.gen.kind = Generator::kUniform;
  f.generate_uniform_ms =
      time_ms(stream, it, [&] { gpu::launch_generate(uniform, buffer, sm_count, stream); });
  gpu::ChunkWork arange = work;
  arange.gen.kind = Generator::kArange;
  f.generate_arange_ms =
      time_ms(stream, it, [&] { gpu::launch_generate(arange, buffer, sm_count, stream); });
  if (work.box.cols % 2 == 0 && work.array_cols % 2 == 0) {
    const uint32_t pair_cols = uint32_t(work.box.cols / 2);
    const uint32_t grid_x = (pair_cols + 255) / 256;
    const uint32_t grid_y = uint32_t(std::min<uint64_t>(
        {work.box.rows, 65535, std::max<uint64_t>(1, uint64_t(sm_count) * 32 / grid_x)}));
    const dim3 grid{grid_x, grid_y, 1};
    f.generate_cuda_libm_ms = time_ms(stream, it, [&] {
      generate_cuda_libm_kernel<<<grid, 256, 0, stream>>>(work.gen, work.array_cols,
                                                      uint32_t(work.box.rows), pair_cols,
                                                      static_cast<double2*>(buffer));
      PSCHED_CUDA_CHECK(cudaGetLastError());
    });
  }
}

// The chunk-sized device memory measure_floor times kernels on.
struct FloorBuffers {
  void *buffer = nullptr, *copy = nullptr;
  gpu::ChunkAccumulator* acc = nullptr;
  gpu::ChunkResult* result = nullptr;
  double* sum_out = nullptr;
};

FloorBuffers allocate_floor_buffers(uint64_t bytes) {
  FloorBuffers b;
  PSCHED_CUDA_CHECK(cudaMalloc(&b.buffer, bytes));
  PSCHED_CUDA_CHECK(cudaMalloc(&b.copy, bytes));
  PSCHED_CUDA_CHECK(cudaMalloc(&b.acc, sizeof(*b.acc)));
  PSCHED_CUDA_CHECK(cudaMalloc(&b.result, sizeof(*b.result)));
  PSCHED_CUDA_CHECK(cudaMalloc(&b.sum_out, sizeof(double)));
  return b;
}

void free_floor_buffers(const FloorBuffers& b) {
  for (void* p : {b.buffer, b.copy, static_cast<void*>(b.acc), static_cast<void*>(b.result),
                  static_cast<void*>(b.sum_out)})
    PSCHED_CUDA_CHECK(cudaFree(p));
}

// CUB's sums of the generated chunk in b.buffer, for reference: the strided (x + 1)[::2, ::2]
// (plain, inexact) and the whole chunk (its read bandwidth).
void time_cub_sums(const gpu::ChunkWork& work, const FloorBuffers& b, cudaStream_t stream, int it,
                   Floor& f) {
  const double* data = static_cast<const double*>(b.buffer);
  const uint64_t n = work.box.rows * work.box.cols;
  const StridedPlusOne plus_one{data, uint32_t(work.cols.count), uint32_t(2 * work.box.cols)};
  auto strided = thrust::make_transform_iterator(thrust::counting_iterator<uint32_t>(0), plus_one);
  const uint32_t selected = uint32_t(work.selected());
  size_t sum_temp_bytes = 0, strided_temp_bytes = 0;
  PSCHED_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, sum_temp_bytes, data, b.sum_out, uint32_t(n)));
  PSCHED_CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, strided_temp_bytes, strided, b.sum_out, selected));
  sum_temp_bytes = std::max(sum_temp_bytes, strided_temp_bytes);
  void* sum_temp = nullptr;
  PSCHED_CUDA_CHECK(cudaMalloc(&sum_temp, sum_temp_bytes));
  f.sum_only_ms = time_ms(stream, it, [&] {
    PSCHED_CUDA_CHECK(cub::DeviceReduce::Sum(sum_temp, sum_temp_bytes, strided, b.sum_out, selected, stream));
  });
  f.cub_sum_ms = time_ms(stream, it, [&] {
    PSCHED_CUDA_CHECK(cub::DeviceReduce::Sum(sum_temp, sum_temp_bytes, data, b.sum_out, uint32_t(n), stream));
  });
  f.cub_sum_tb_per_s = double(work.box_bytes()) / (f.cub_sum_ms * 1e-3) / 1e12;
  PSCHED_CUDA_CHECK(cudaStreamSynchronize(stream));
  PSCHED_CUDA_CHECK(cudaFree(sum_temp));
}

Floor measure_floor(const Args& a, const JobSpec& spec, int sm_count) {
  Floor f{};
  gpu::ChunkWork work = gpu::chunk_work(spec, 0);
  gpu::ChunkWork fused = work;
  fused.fused = true;
  const uint64_t bytes = work.box_bytes();
  cudaStream_t stream;
  PSCHED_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const FloorBuffers b = allocate_floor_buffers(bytes);

  const int it = a.iterations;
  auto generate = [&] { gpu::launch_generate(work, b.buffer, sm_count, stream); };
  auto reduce = [&] {
    gpu::launch_reduce(gpu::BatchWork{work, 1, 0}, b.buffer, b.acc, b.result, sm_count, stream);
  };
  f.generate_ms = time_ms(stream, it, generate);
  time_generator_variants(work, b.buffer, sm_count, stream, it, f);
  generate();
  f.reduce_ms = time_ms(stream, it, reduce);
  time_cub_sums(work, b, stream, it, f);
  f.floor_ms = time_ms(stream, it, [&] {
    generate();
    reduce();
  });
  f.mean = exact_sum_of(b.acc, b.result) / double(work.selected());
  f.fused_ms = time_ms(stream, it, [&] {
    gpu::launch_reduce(gpu::BatchWork{fused, 1, 0}, nullptr, b.acc, b.result, sm_count, stream);
  });
  const double copy_ms = time_ms(stream, it, [&] {
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(b.copy, b.buffer, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  f.copy_tb_per_s = 2.0 * double(bytes) / (copy_ms * 1e-3) / 1e12;

  PSCHED_CUDA_CHECK(cudaStreamSynchronize(stream));
  free_floor_buffers(b);
  PSCHED_CUDA_CHECK(cudaStreamDestroy(stream));
  return f;
}

// One batch of the backend's size for SIDE^2 chunks of the same job (cuda_floor.h).

BatchFloor measure_batch(const Args& a, JobSpec spec, int sm_count) {
  spec.chunk_rows = spec.chunk_cols = a.batch_side;
  const Status valid = validate(spec);
  if (!valid) usage(valid.message().c_str());
  spec = normalized(spec);
  const uint64_t elements = a.batch_side * a.batch_side;
  BatchFloor f;
  f.chunks = uint32_t(std::min<uint64_t>(gpu::kMaxBatchChunks,
                                         std::max<uint64_t>(1, gpu::kBatchTargetElements / elements)));
  const gpu::BatchWork batch{gpu::chunk_work(spec, 0), f.chunks, elements};
  cudaStream_t stream;
  PSCHED_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void* buffer = nullptr;
  gpu::ChunkAccumulator* acc = nullptr;
  gpu::ChunkResult* results = nullptr;
  PSCHED_CUDA_CHECK(cudaMalloc(&buffer, elements * f.chunks * sizeof(double)));
  PSCHED_CUDA_CHECK(cudaMalloc(&acc, sizeof(*acc) * f.chunks));
  PSCHED_CUDA_CHECK(cudaMalloc(&results, sizeof(*results) * f.chunks));
  auto generate = [&] { gpu::launch_generate_batch(batch, buffer, sm_count, stream); };
  auto reduce = [&] { gpu::launch_reduce(batch, buffer, acc, results, sm_count, stream); };
  f.generate_ms = time_ms(stream, a.iterations, generate);
  f.reduce_ms = time_ms(stream, a.iterations, reduce);
  f.total_ms = time_ms(stream, a.iterations, [&] {
    generate();
    reduce();
  });
  f.ms_per_1e8 = f.total_ms * 1e8 / double(elements * f.chunks);
  void* host = nullptr;
  PSCHED_CUDA_CHECK(cudaMallocHost(&host, sizeof(*acc) * f.chunks));
  f.copy_results_ms = time_ms(stream, a.iterations, [&] {
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(host, results, sizeof(*results) * f.chunks,
                                      cudaMemcpyDeviceToHost, stream));
  });
  f.copy_full_ms = time_ms(stream, a.iterations, [&] {
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(host, acc, sizeof(*acc) * f.chunks, cudaMemcpyDeviceToHost,
                                      stream));
  });
  PSCHED_CUDA_CHECK(cudaStreamSynchronize(stream));
  PSCHED_CUDA_CHECK(cudaFreeHost(host));
  for (void* p : {buffer, static_cast<void*>(acc), static_cast<void*>(results)})
    PSCHED_CUDA_CHECK(cudaFree(p));
  PSCHED_CUDA_CHECK(cudaStreamDestroy(stream));
  return f;
}


// N chunks through CudaBackend with a window of slots() in flight, as the worker keeps them; the
// first window is a warm-up (buffer allocation) and is not timed.
BackendRun run_backend(const Args& a, const JobSpec& spec) {
  CudaBackendOptions options;
  options.device = a.device;
  options.streams = a.streams;
  auto made = make_cuda_backend(options);
  if (!made) {
    std::fprintf(stderr, "cuda-floor: %s\n", made.message().c_str());
    std::exit(1);
  }
  Backend& backend = **made;
  JobSpec job = spec;
  job.fused = a.fused;
  auto shared = std::make_shared<const JobSpec>(job);
  const uint64_t grid_chunks =
      ChunkGrid{job.rows, job.cols, job.chunk_rows, job.chunk_cols}.chunks();
  const uint64_t window = uint64_t(backend.slots());
  const uint64_t warmup = window;
  const uint64_t total = warmup + a.chunks;

  std::mutex mutex;
  std::condition_variable cv;
  uint64_t next = 0, done = 0;
  double busy = 0, sum = 0, count = 0;
  BackendRun run;
  std::chrono::steady_clock::time_point start;
  backend.start([&](std::vector<ChunkOutcome>& outcomes) {
    std::lock_guard<std::mutex> lock(mutex);
    for (const ChunkOutcome& o : outcomes) {
      if (++done == warmup) start = std::chrono::steady_clock::now();
      if (done > warmup) {
        busy += o.busy_seconds;
        sum += o.partial.sum;
        count += double(o.partial.count);
      }
      if (!o.ok && run.failed++ == 0) run.first_error = o.error;
      if (next < total) backend.enqueue(ChunkTask{1, next++ % grid_chunks, shared});
    }
    cv.notify_all();
  });
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (; next < std::min(window, total); ++next)
      backend.enqueue(ChunkTask{1, next % grid_chunks, shared});
  }
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return done == total; });
  const auto end = std::chrono::steady_clock::now();
  lock.unlock();
  backend.stop();
  const double wall_ms = std::chrono::duration<double, std::milli>(end - start).count();
  run.ms_per_chunk = wall_ms / double(a.chunks);
  run.busy_ms_per_chunk = busy * 1e3 / double(a.chunks);
  run.mean = count > 0 ? sum / count : 0;
  return run;
}


}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  std::string why;
  const int devices = cuda_device_count(&why);
  if (devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  if (args.device < 0 || args.device >= devices) usage("--device out of range");
  try {
    PSCHED_CUDA_CHECK(cudaSetDevice(args.device));
    cudaDeviceProp prop{};
    PSCHED_CUDA_CHECK(cudaGetDeviceProperties(&prop, args.device));
    const JobSpec spec = deepops_benchmark_job(args);
    const Floor f = measure_floor(args, spec, prop.multiProcessorCount);
    print_floor(prop.name, spec, args, f);
    if (args.batch_side > 0)
      print_batch(spec, f, measure_batch(args, spec, prop.multiProcessorCount), args.batch_side);
    BackendRun run;
    if (args.chunks > 0) {
      run = run_backend(args, spec);
      print_backend(args, f, run);
    }
    print_roofline(f, args.chunks > 0 ? &run : nullptr);
    print_summary(prop.name, args, f, args.chunks > 0 ? &run : nullptr);
    return run.failed > 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cuda-floor: %s\n", e.what());
    return 1;
  }
}
