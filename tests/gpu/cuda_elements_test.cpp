// The CUDA generators against the host's scalar reference (core/generators.h), element by element
// and bit for bit: chunks generated on the device (one chunk, and batches of small chunks) for every
// generator in float64 and float32, millions of elements at indices past 2^32, and the ziggurat of
// edge words. docs/design.md, "The element definition", promises these bits everywhere.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "element_kernels.h"
#include "gpu_test_support.h"
#include "tests/support/edge_normal_words.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernels.cuh"

using namespace psched;
using namespace psched::gpu_test;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

int sm_count() {
  int device = 0, sms = 0;
  PSCHED_CUDA_CHECK(cudaGetDevice(&device));
  PSCHED_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// The device buffer's elements, widened to double (float32 elements exactly).
std::vector<double> fetch(const void* device, uint64_t n, DType dtype) {
  std::vector<double> out(n);
  if (dtype == DType::kFloat64) {
    PSCHED_CUDA_CHECK(cudaMemcpy(out.data(), device, n * sizeof(double), cudaMemcpyDeviceToHost));
  } else {
    std::vector<float> f(n);
    PSCHED_CUDA_CHECK(cudaMemcpy(f.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (uint64_t i = 0; i < n; ++i) out[i] = f[i];
  }
  return out;
}

// The stored element at a global index: element_value, rounded to float for float32.
double reference(const GeneratorParams& g, DType dtype, uint64_t index) {
  const double v = element_value(g, index);
  return dtype == DType::kFloat64 ? v : double(float(v));
}

// How many elements of `box` (stored row-major at `got`) differ from the reference; the first
// difference goes to `first_bad`.
uint64_t count_differences(const gpu::ChunkWork& w, const double* got, std::string& first_bad) {
  uint64_t differ = 0;
  for (uint64_t r = 0; r < w.box.rows; ++r) {
    for (uint64_t c = 0; c < w.box.cols; ++c) {
      const uint64_t index = (w.box.row0 + r) * w.array_cols + w.box.col0 + c;
      const double want = reference(w.gen, w.dtype, index);
      const double v = got[r * w.box.cols + c];
      if (!same_bits(v, want) && differ++ == 0)
        first_bad = "index " + std::to_string(index) + ": GPU " + std::to_string(v) + " host " +
                    std::to_string(want);
    }
  }
  return differ;
}

JobSpec elements_job(Generator generator, DType dtype) {
  // 100000 x 99999 (odd: rows start on odd and even indices, so normal pairs straddle rows),
  // 2048 x 2048 chunks: a chunk holds 4.2 million elements, at indices past 2^32 from chunk 49 on.
  JobSpec s = arange_job(100000, 99999, 2048, 2048);
  s.generator = generator;
  s.dtype = dtype;
  s.seed = 0x5eed0123456789abu;
  s.param0 = generator == Generator::kNormal ? 10 : generator == Generator::kUniform ? -3 : 0.25;
  s.param1 = generator == Generator::kNormal ? 2 : generator == Generator::kUniform ? 5 : 1e-3;
  return s;
}

}  // namespace

TEST_CASE("GPU chunks hold the host reference's elements bit for bit, every generator in float64 and float32", "[gpu][elements]") {
  const int sms = sm_count();
  void* buffer = nullptr;
  PSCHED_CUDA_CHECK(cudaMalloc(&buffer, 2048 * 2048 * sizeof(double)));
  for (Generator g : {Generator::kNormal, Generator::kUniform, Generator::kArange, Generator::kConstant}) {
    for (DType d : {DType::kFloat64, DType::kFloat32}) {
      const auto spec = prepared(elements_job(g, d));
      for (gpu::ElementFormula formula : {gpu::ElementFormula::kFast, gpu::ElementFormula::kReference}) {
        // A chunk at the start of the array and one past 2^32 (chunk 1000: row 20, column 20).
        for (uint64_t chunk : {uint64_t{0}, uint64_t{1000}}) {
          const gpu::ChunkWork w = gpu::chunk_work(*spec, chunk);
          INFO(describe(*spec) << " chunk " << chunk
                               << (formula == gpu::ElementFormula::kFast ? " fast" : " reference"));
          gpu::launch_generate(w, buffer, sms, nullptr, formula);
          const std::vector<double> got = fetch(buffer, w.box.rows * w.box.cols, d);
          std::string first_bad;
          const uint64_t differ = count_differences(w, got.data(), first_bad);
          INFO(first_bad);
          CHECK(differ == 0);
        }
      }
    }
  }
  PSCHED_CUDA_CHECK(cudaFree(buffer));
}

TEST_CASE("batched GPU chunks hold the host reference's elements bit for bit", "[gpu][elements]") {
  const int sms = sm_count();
  for (Generator g : {Generator::kNormal, Generator::kUniform}) {
    for (DType d : {DType::kFloat64, DType::kFloat32}) {
      // 700 x 333 chunks of 31 x 17 (odd widths: pairs straddle rows and chunks), one batch of 300.
      JobSpec s = elements_job(g, d);
      s.rows = 700;
      s.cols = 333;
      s.chunk_rows = 31;
      s.chunk_cols = 17;
      const auto spec = prepared(s);
      const uint64_t stride = s.chunk_rows * s.chunk_cols;
      const gpu::BatchWork batch{gpu::chunk_work(*spec, 5), 300, stride};
      void* buffer = nullptr;
      PSCHED_CUDA_CHECK(cudaMalloc(&buffer, batch.count * stride * sizeof(double)));
      gpu::launch_generate_batch(batch, buffer, sms, nullptr);
      const std::vector<double> got = fetch(buffer, batch.count * stride, d);
      PSCHED_CUDA_CHECK(cudaFree(buffer));
      for (uint32_t z = 0; z < batch.count; ++z) {
        const gpu::ChunkWork w = gpu::chunk_work(*spec, 5 + z);
        INFO(describe(*spec) << " chunk " << 5 + z);
        std::string first_bad;
        const uint64_t differ = count_differences(w, got.data() + z * stride, first_bad);
        INFO(first_bad);
        REQUIRE(differ == 0);
      }
    }
  }
}

TEST_CASE("the GPU's ziggurat of edge words has the host's bits", "[gpu][elements]") {
  // The edges tests/worker/kernels_test.cpp feeds the CPU builds, and a million random words
  // (some 7000 slow paths, a few hundred of them tails).
  test::NormalWords words = test::edge_normal_words();
  for (uint64_t m = 0; m < 1000000; ++m) {
    const UniformPair u = uniform_pair(77, m);  // any 53 bits: shifted up, with 11 random low bits
    words.words.push_back(uint64_t(u.u0 * 0x1p53) << 11 | (uint64_t(u.u1 * 0x1p53) & 0x7ff));
    words.index.push_back(m * 2 + 1);
  }
  std::vector<double> got(words.words.size());
  device_ziggurat(77, words.index.data(), words.words.data(), got.size(), got.data());
  uint64_t differ = 0;
  std::string first_bad;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!same_bits(got[i], ziggurat(77, words.index[i], words.words[i])) && differ++ == 0)
      first_bad = "word " + std::to_string(words.words[i]) + " index " + std::to_string(words.index[i]);
  }
  INFO(first_bad);
  CHECK(differ == 0);
}
