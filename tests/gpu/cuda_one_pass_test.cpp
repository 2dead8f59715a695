// One pass (launch_generate_reduce, one_pass.cu) against the two-kernel path it stands for
// (launch_generate_batch, then launch_reduce reading the chunks back): the same buffer, byte for
// byte, and the same results, bit for bit, for every generator and dtype, slices with starts and
// steps, ragged grids, rows that start half way through a normal pair, batches of one chunk to
// thousands, and a selection past 2^30 elements (the blocks carry).
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gpu_test_support.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernels.cuh"

using namespace psched;
using namespace psched::gpu_test;

namespace {

// Device memory, zeroed, freed with the object.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    PSCHED_CUDA_CHECK(cudaMalloc(&p_, bytes_));
    PSCHED_CUDA_CHECK(cudaMemset(p_, 0, bytes_));
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  template <typename T>
  std::vector<T> host() const {
    std::vector<T> out(bytes_ / sizeof(T));
    PSCHED_CUDA_CHECK(cudaMemcpy(out.data(), p_, out.size() * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_;
};

// What one way of making `count` chunks from `first` left: the buffer's bytes (up to
// kCompareBytes: the 4 GB of the carry case stay on the device), the results and the accumulators
// (a wide result's exact sum is its accumulator's).
constexpr size_t kCompareBytes = size_t{1} << 30;
struct Made {
  std::vector<unsigned char> buffer;
  std::vector<gpu::ChunkResult> results;
  std::vector<gpu::ChunkAccumulator> acc;
};

Made make(const JobSpec& raw, uint64_t first, uint32_t count, bool one_pass) {
  const JobSpec spec = normalized(raw);
  const gpu::BatchWork b{gpu::chunk_work(spec, first), count, spec.chunk_rows * spec.chunk_cols};
  DeviceBuffer buffer(b.stride_elements * count * element_bytes(spec.dtype));
  DeviceBuffer acc(sizeof(gpu::ChunkAccumulator) * count), results(sizeof(gpu::ChunkResult) * count);
  int device = 0, sms = 0;
  PSCHED_CUDA_CHECK(cudaGetDevice(&device));
  PSCHED_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto* accumulators = static_cast<gpu::ChunkAccumulator*>(acc.get());
  auto* out = static_cast<gpu::ChunkResult*>(results.get());
  if (one_pass) {
    gpu::launch_generate_reduce(b, buffer.get(), accumulators, out, sms, nullptr);
  } else {
    gpu::launch_generate_batch(b, buffer.get(), sms, nullptr);
    gpu::launch_reduce(b, buffer.get(), accumulators, out, sms, nullptr);
  }
  PSCHED_CUDA_CHECK(cudaDeviceSynchronize());
  const size_t bytes = b.stride_elements * count * element_bytes(spec.dtype);
  return Made{bytes <= kCompareBytes ? buffer.host<unsigned char>() : std::vector<unsigned char>{},
              results.host<gpu::ChunkResult>(), acc.host<gpu::ChunkAccumulator>()};
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Both ways on the same chunks: the same bytes written and the same result for every chunk.
void require_one_pass_same(const JobSpec& spec, uint64_t first, uint32_t count) {
  REQUIRE(validate(spec));
  const Made two = make(spec, first, count, /*one_pass=*/false);
  const Made one = make(spec, first, count, /*one_pass=*/true);
  CHECK(one.buffer == two.buffer);
  for (uint32_t z = 0; z < count; ++z) {
    INFO("chunk " << first + z);
    const gpu::ChunkResult& a = one.results[z];
    const gpu::ChunkResult& b = two.results[z];
    CHECK(same_bits(a.min, b.min));
    CHECK(same_bits(a.max, b.max));
    REQUIRE(a.wide == b.wide);
    if (a.wide) {
      // Uncarried digits differ with the grid; the values may not.
      CHECK(same_value(one.acc[z].exact, two.acc[z].exact));
    } else {
      CHECK(std::memcmp(&a, &b, sizeof a) == 0);
    }
  }
}

}  // namespace

TEST_CASE("one pass writes the two-kernel path's chunks and gives its results, bit for bit", "[gpu][one_pass]") {
  for (Generator g : {Generator::kNormal, Generator::kUniform, Generator::kArange, Generator::kConstant}) {
    for (DType d : {DType::kFloat64, DType::kFloat32}) {
      // A ragged grid (edge chunks both ways) of 41 x 39 chunks with starts, steps and an expression.
      JobSpec s = arange_job(1013, 1003, 25, 26);
      s.generator = g;
      s.dtype = d;
      s.seed = 17;
      s.param0 = g == Generator::kNormal ? 10 : g == Generator::kUniform ? -2 : 3;
      s.param1 = g == Generator::kNormal ? 1 : g == Generator::kUniform ? 5 : 2;
      s.scale = 2;
      s.offset = -1;
      s.row_sel = Slice{1, 1000, 3};
      s.col_sel = Slice{0, kToEnd, 2};
      INFO(generator_name(g) << " " << dtype_name(d));
      require_one_pass_same(s, 0, uint32_t(s.chunks()));  // every chunk in one batch
      require_one_pass_same(s, 100, 7);
      require_one_pass_same(s, s.chunks() - 1, 1);  // the corner chunk alone
      // Odd starts and steps of 5 and 3, a negative scale; chunks of an odd width, so normal rows
      // start half way through a pair.
      s.rows = 300;
      s.cols = 301;
      s.chunk_rows = 64;
      s.chunk_cols = 77;
      s.scale = -3;
      s.row_sel = Slice{3, kToEnd, 5};
      s.col_sel = Slice{7, 290, 3};
      require_one_pass_same(s, 0, uint32_t(s.chunks()));
      // One-element chunks, every element selected.
      s.rows = s.cols = 40;
      s.chunk_rows = s.chunk_cols = 1;
      s.row_sel = s.col_sel = Slice{0, kToEnd, 1};
      require_one_pass_same(s, 0, uint32_t(s.chunks()));
    }
  }
}

TEST_CASE("one pass on the DeepOps benchmark's chunks, (x + 1)[::2, ::2] of normal(10, 1), one at a time",
          "[gpu][one_pass]") {
  JobSpec s;  // the seed's generator and expression
  s.rows = 8000;
  s.cols = 8001;  // odd: every other row starts half way through a normal pair
  s.chunk_rows = 4000;
  s.chunk_cols = 4000;
  s.row_sel = Slice{0, kToEnd, 2};
  s.col_sel = Slice{0, kToEnd, 2};
  s.offset = 1;
  for (uint64_t chunk = 0; chunk < s.chunks(); ++chunk) {
    INFO("chunk " << chunk);
    require_one_pass_same(s, chunk, 1);
  }
}

TEST_CASE("one pass over a chunk of more than 2^30 selected elements carries its blocks", "[gpu][one_pass]") {
  JobSpec s;
  s.generator = Generator::kUniform;
  s.dtype = DType::kFloat32;
  s.param0 = -1e30;  // wide sums: digits far apart
  s.param1 = 1e30;
  s.rows = s.chunk_rows = 32800;
  s.cols = s.chunk_cols = 32800;  // 1.08e9 elements, all selected
  require_one_pass_same(s, 0, 1);
}

TEST_CASE("the backend making chunks in one pass gives the CPU backend's partials, big chunks and batches",
          "[gpu][one_pass]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  CudaBackendOptions options;
  options.one_pass = true;
  auto backend = backend_with(options);
  backend->start(outcomes.callback());
  std::vector<double> scratch;
  uint64_t job_id = 0;
  // A big chunk at a time (past kBatchMaxChunkElements) and batches of small ones; ragged edges.
  for (const auto& [rows, cols, chunk_rows, chunk_cols] :
       {std::tuple{12000, 9000, 6000, 6000}, std::tuple{1013, 1003, 25, 26}}) {
    const auto spec = prepared(arange_job(rows, cols, chunk_rows, chunk_cols));
    INFO(rows << " x " << cols << " in " << chunk_rows << " x " << chunk_cols);
    const auto gpu = run_job(*backend, outcomes, spec, ++job_id);
    for (uint64_t c = 0; c < gpu.size(); ++c) {
      INFO("chunk " << c);
      require_equal(gpu[c].partial, reduce_chunk_cpu(*spec, c, scratch));
    }
  }
}
