// The CUDA backend's sums are exact (issue 16): every chunk's partial carries the exact sum of its
// selected elements, equal digit for digit (after normalisation) to a slow host reference that
// adds the same elements one by one into an ExactSum; the same bits whatever the batch, the
// chunking, the path (batched, big, fused); NaN and infinities counted, min and max as before.
// For arange and constant the host evaluates the elements itself (bit-identical on both sides);
// for normal and uniform it adds the GPU's own elements, copied back from a generated chunk.
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/exact_sum.h"
#include "core/generators.h"
#include "gpu_test_support.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernels.cuh"

using namespace psched;
using namespace psched::gpu_test;

namespace {

// The element at (r, c) of the array as the job stores it (before scale and offset).
using StoredElement = std::function<double(uint64_t r, uint64_t c)>;

StoredElement host_elements(const JobSpec& spec) {
  const gpu::ChunkWork w = gpu::chunk_work(spec, 0);
  return [gen = w.gen, cols = spec.cols, f32 = spec.dtype == DType::kFloat32](uint64_t r,
                                                                              uint64_t c) {
    const double v = element_value(gen, r * cols + c);
    return f32 ? double(float(v)) : v;
  };
}

// The slow reference: chunk's selected elements, scale * x + offset each rounded as the kernels
// round it, added one by one.
PartialSum reference_partial(const JobSpec& spec, uint64_t chunk, const StoredElement& element) {
  const gpu::ChunkWork w = gpu::chunk_work(spec, chunk);
  PartialSum p;
  for (uint64_t i = 0; i < w.rows.count; ++i) {
    for (uint64_t k = 0; k < w.cols.count; ++k) {
      const double x = element(w.rows.first + i * w.row_step, w.cols.first + k * w.col_step);
      const double v = mul_add_rounded(spec.scale, x, spec.offset);
      p.exact.add(v);
      ++p.count;
      if (!std::isnan(v)) {
        p.min = std::min(p.min, v);
        p.max = std::max(p.max, v);
      }
    }
  }
  p.sum = p.exact.rounded();
  return p;
}

void require_exact(const PartialSum& gpu, const PartialSum& ref) {
  CHECK(gpu.count == ref.count);
  CHECK(same_value(gpu.exact, ref.exact));
  CHECK(std::memcmp(&gpu.sum, &ref.sum, sizeof(double)) == 0);
  CHECK(gpu.min == ref.min);
  CHECK(gpu.max == ref.max);
}
void require_exact(const CompactPartial& gpu, const PartialSum& ref) { require_exact(expand(gpu), ref); }

// Every chunk of the job through the backend, against the reference over host elements.
void require_exact_job(Backend& backend, Outcomes& outcomes, const JobSpec& spec, uint64_t job_id) {
  const auto prepared_spec = prepared(spec);
  const auto gpu = run_job(backend, outcomes, prepared_spec, job_id);
  const StoredElement element = host_elements(*prepared_spec);
  for (uint64_t c = 0; c < gpu.size(); ++c) {
    INFO("chunk " << c);
    require_exact(gpu[c].partial, reference_partial(*prepared_spec, c, element));
  }
}

// Every element, as it is: scale 1, offset 0, no selection.
JobSpec plain(JobSpec s) {
  s.scale = 1;
  s.offset = 0;
  s.row_sel = Slice{0, kToEnd, 1};
  s.col_sel = Slice{0, kToEnd, 1};
  return s;
}

ExactSum merged(const std::vector<ChunkOutcome>& outcomes) {
  ExactSum total;
  for (const ChunkOutcome& o : outcomes) {
    ExactSum e = o.partial.exact.value();
    e.normalize();
    total.add(e);
  }
  return total;
}

}  // namespace

TEST_CASE("GPU chunk sums equal the exact reference: arange and constant, every path", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<std::pair<std::string, JobSpec>> jobs;
  {
    JobSpec s = arange_job(1013, 1003, 25, 26);  // batched, ragged, steps
    s.param0 = -250000.3;                        // negative start: sums cancel
    s.param1 = 0.7;
    s.scale = 3;
    s.offset = -0.1;
    s.row_sel = Slice{1, 1000, 3};
    jobs.emplace_back("arange(-250000.3, 0.7), 25 x 26 chunks, [1:1000:3, ::2]", s);
  }
  {
    JobSpec s = arange_job(3000, 2900, 1000, 700);  // batched, many blocks per chunk
    s.dtype = DType::kFloat32;
    s.param0 = -4350000;
    s.param1 = 1.25;
    s.scale = 0.1;
    s.row_sel = Slice{0, kToEnd, 1};
    s.col_sel = Slice{3, kToEnd, 1};
    jobs.emplace_back("float32 arange, cancelling, 1000 x 700 chunks", s);
  }
  {
    JobSpec s = arange_job(6100, 6050, 6000, 6000);  // 3.6e7-element chunks: the big path
    s.param0 = -1.8e7;
    s.param1 = 1.0 / 3;
    s.offset = 0.5;
    s.row_sel = Slice{0, kToEnd, 2};
    s.col_sel = Slice{1, kToEnd, 3};
    jobs.emplace_back("big chunks, arange(-1.8e7, 1/3), [::2, 1::3]", s);
  }
  {
    JobSpec s = plain(arange_job(300, 200, 40, 30));  // sums wider than the compact window
    s.param0 = 3e-300;
    s.param1 = 1e290;
    jobs.emplace_back("arange(3e-300, 1e290): sums spanning 2^-997 .. 2^980", s);
  }
  {
    JobSpec s = arange_job(777, 333, 100, 100);
    s.generator = Generator::kConstant;
    s.param0 = 0.1;
    s.offset = -0.3;
    jobs.emplace_back("constant(0.1) - 0.3", s);
  }
  uint64_t job_id = 0;
  for (const bool fused : {false, true}) {
    for (auto [name, spec] : jobs) {
      spec.fused = fused;
      INFO(name << (fused ? " (fused)" : ""));
      require_exact_job(*backend, outcomes, spec, ++job_id);
    }
  }
}

TEST_CASE("GPU chunk sums equal the exact sum of the GPU's own normal and uniform elements", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<JobSpec> jobs;
  for (DType d : {DType::kFloat64, DType::kFloat32}) {
    JobSpec normal = plain(arange_job(1200, 1100, 500, 400));  // batched, ragged, steps
    normal.generator = Generator::kNormal;
    normal.param0 = 0;  // mean 0: tiny elements, wide sums, cancellation
    normal.param1 = 1;
    normal.seed = 11;
    normal.dtype = d;
    normal.row_sel = Slice{1, kToEnd, 3};
    jobs.push_back(normal);
    JobSpec uniform = normal;
    uniform.generator = Generator::kUniform;
    uniform.param0 = -2;
    uniform.param1 = 5;
    uniform.scale = 2;
    uniform.offset = -3;
    jobs.push_back(uniform);
  }
  uint64_t job_id = 100;
  for (const JobSpec& base : jobs) {
    for (const bool fused : {false, true}) {
      JobSpec spec = base;
      spec.fused = fused;
      INFO(describe(spec));
      const auto prepared_spec = prepared(spec);
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      // The GPU's elements of each chunk, generated on the device and copied back.
      for (uint64_t c = 0; c < gpu.size(); ++c) {
        INFO("chunk " << c);
        const gpu::ChunkWork w = gpu::chunk_work(*prepared_spec, c);
        const uint64_t n = w.box.rows * w.box.cols;
        void* device = nullptr;
        PSCHED_CUDA_CHECK(cudaMalloc(&device, w.box_bytes()));
        gpu::launch_generate(w, device, 4, nullptr);
        std::vector<double> f64(spec.dtype == DType::kFloat64 ? n : 0);
        std::vector<float> f32(spec.dtype == DType::kFloat32 ? n : 0);
        void* host = spec.dtype == DType::kFloat64 ? static_cast<void*>(f64.data()) : f32.data();
        PSCHED_CUDA_CHECK(cudaMemcpy(host, device, w.box_bytes(), cudaMemcpyDeviceToHost));
        PSCHED_CUDA_CHECK(cudaFree(device));
        const StoredElement element = [&](uint64_t r, uint64_t col) {
          const uint64_t i = (r - w.box.row0) * w.box.cols + (col - w.box.col0);
          return spec.dtype == DType::kFloat64 ? f64[i] : double(f32[i]);
        };
        require_exact(gpu[c].partial, reference_partial(*prepared_spec, c, element));
      }
    }
  }
}

TEST_CASE("the exact sum of an array is the same whatever its chunking and path", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  JobSpec s = arange_job(6100, 6050, 1, 1);
  s.generator = Generator::kNormal;
  s.param0 = 10;
  s.param1 = 1;
  s.seed = 5;
  s.row_sel = Slice{0, kToEnd, 2};
  s.col_sel = Slice{0, kToEnd, 2};
  std::vector<ExactSum> totals;
  uint64_t job_id = 200;
  for (const auto& [rows, cols] : std::vector<std::pair<uint64_t, uint64_t>>{
           {6000, 6000}, {1000, 700}, {100, 100}, {61, 605}}) {
    for (const bool fused : {false, true}) {
      JobSpec spec = s;
      spec.chunk_rows = rows;
      spec.chunk_cols = cols;
      spec.fused = fused;
      INFO(describe(spec));
      totals.push_back(merged(run_job(*backend, outcomes, prepared(spec), ++job_id)));
      CHECK(same_value(totals.back(), totals.front()));
    }
  }
  CHECK(std::fabs(totals.front().rounded() / (3050.0 * 3025.0) - 11.0) < 1e-2);
}

namespace {

// launch_reduce straight on values the generators never make: each chunk of a 1 x (n * chunks)
// array in chunks of n holds its own values, stored where the batch's buffer puts them.
std::vector<gpu::ChunkResult> reduce_values(const std::vector<std::vector<double>>& chunks,
                                            std::vector<gpu::ChunkAccumulator>& accumulators) {
  const uint64_t n = chunks.front().size();
  JobSpec s = plain(JobSpec{});
  s.rows = 1;
  s.cols = n * chunks.size();
  s.chunk_rows = 1;
  s.chunk_cols = n;
  s.generator = Generator::kConstant;
  s.param0 = 1;
  const auto spec = prepared(s);
  const gpu::BatchWork batch{gpu::chunk_work(*spec, 0), uint32_t(chunks.size()), n};
  std::vector<double> flat;
  for (const auto& c : chunks) flat.insert(flat.end(), c.begin(), c.end());
  double* buffer = nullptr;
  gpu::ChunkAccumulator* acc = nullptr;
  gpu::ChunkResult* results = nullptr;
  PSCHED_CUDA_CHECK(cudaMalloc(&buffer, flat.size() * sizeof(double)));
  PSCHED_CUDA_CHECK(cudaMalloc(&acc, chunks.size() * sizeof(*acc)));
  PSCHED_CUDA_CHECK(cudaMalloc(&results, chunks.size() * sizeof(*results)));
  PSCHED_CUDA_CHECK(
      cudaMemcpy(buffer, flat.data(), flat.size() * sizeof(double), cudaMemcpyHostToDevice));
  gpu::launch_reduce(batch, buffer, acc, results, 8, nullptr);
  std::vector<gpu::ChunkResult> out(chunks.size());
  accumulators.resize(chunks.size());
  PSCHED_CUDA_CHECK(cudaMemcpy(out.data(), results, out.size() * sizeof(*results),
                               cudaMemcpyDeviceToHost));
  PSCHED_CUDA_CHECK(cudaMemcpy(accumulators.data(), acc, out.size() * sizeof(*acc),
                               cudaMemcpyDeviceToHost));
  for (void* p : {static_cast<void*>(buffer), static_cast<void*>(acc),
                  static_cast<void*>(results)})
    PSCHED_CUDA_CHECK(cudaFree(p));
  return out;
}

}  // namespace

TEST_CASE("the device reduction counts NaN and infinities and adds extremes exactly", "[gpu]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double tiny = std::numeric_limits<double>::denorm_min();
  const double huge = std::numeric_limits<double>::max();
  const uint64_t n = 5000;
  std::vector<std::vector<double>> chunks(7, std::vector<double>(n));
  for (uint64_t i = 0; i < n; ++i) {
    const double x = double(i) * 0.37 - 900;
    chunks[0][i] = x;                                              // narrow: the window
    chunks[1][i] = i % 2 ? huge / 8 : -huge / 8;                  // cancelling extremes
    chunks[2][i] = i % 3 == 0 ? tiny * double(i) : x * 1e-300;    // subnormals
    chunks[3][i] = i == 17 ? nan : i == 4000 ? -inf : x;           // specials: NaN, -inf
    chunks[4][i] = i == 5 ? inf : i == 6 ? -inf : 1e300 * (i % 7 ? 1 : -1);
    chunks[5][i] = std::ldexp(1.0, int(i % 2000) - 1000) * (i % 5 ? 1 : -1);  // very wide
    chunks[6][i] = i % 2 ? huge : huge / 3;  // running sums overflow: the exact sum does not
  }
  std::vector<gpu::ChunkAccumulator> acc;
  const auto results = reduce_values(chunks, acc);
  for (size_t c = 0; c < chunks.size(); ++c) {
    INFO("chunk " << c);
    ExactSum want;
    double lo = inf, hi = -inf;
    for (double v : chunks[c]) {
      want.add(v + 0.0);  // the kernels' scale * x + offset with scale 1, offset 0
      if (!std::isnan(v)) {
        lo = std::min(lo, v + 0.0);
        hi = std::max(hi, v + 0.0);
      }
    }
    const ExactSum got = gpu::exact_from(results[c], &acc[c]);
    CHECK(same_value(got, want));
    CHECK(results[c].min == lo);
    CHECK(results[c].max == hi);
    const double g = got.rounded(), w = want.rounded();
    CHECK(((std::isnan(g) && std::isnan(w)) || g == w));
  }
  CHECK_FALSE(results[0].wide);
  CHECK(results[3].wide);
  CHECK(results[4].wide);
  CHECK(results[5].wide);
  CHECK(gpu::exact_from(results[6], &acc[6]).rounded() == inf);
}

TEST_CASE("a chunk of more than 2^30 selected elements sums exactly (blocks carry)", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  JobSpec s = plain(arange_job(32800, 32800, 32800, 32800));  // 1.076e9 elements, fused
  s.generator = Generator::kConstant;
  s.param0 = 0.1;
  s.fused = true;
  const auto gpu = run_job(*backend, outcomes, prepared(s), 300);
  REQUIRE(gpu.size() == 1);
  const uint64_t n = 32800ull * 32800ull;
  // n * 0.1 exactly: 0.1 = m 2^e with an integer m < 2^53, and n m < 2^84 fits three doubles.
  int e2 = 0;
  const double m = std::ldexp(std::frexp(0.1, &e2), 53);
  const unsigned __int128 product = (unsigned __int128)uint64_t(m) * n;
  ExactSum want;
  want.add(std::ldexp(double(uint64_t(product >> 60)), e2 - 53 + 60));
  want.add(std::ldexp(double(uint64_t(product >> 30) & ((1ull << 30) - 1)), e2 - 53 + 30));
  want.add(std::ldexp(double(uint64_t(product) & ((1ull << 30) - 1)), e2 - 53));
  CHECK(gpu[0].partial.count == n);
  CHECK(same_value(gpu[0].partial.exact.value(), want));
  CHECK(gpu[0].partial.min == 0.1);
  CHECK(gpu[0].partial.max == 0.1);
}
