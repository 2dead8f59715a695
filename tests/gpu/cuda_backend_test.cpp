// The CUDA backend against the CPU reference (worker/cpu/reduce.h), chunk by chunk: exact for
// arange and constant; for normal and uniform the elements, counts, minima and maxima exactly and
// the sums to rounding (their summation orders differ); fused against materialized. The
// pipeline's own promises are in cuda_pipeline_test.cpp. Without a usable CUDA device the whole
// binary prints SKIP and succeeds, so CI (no GPU) stays green.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.h"

using namespace psched;
using namespace psched::gpu_test;

namespace {

// Jobs whose every partial sum is an integer (or a dyadic rational) far below 2^53, so any
// summation order gives the same bits: GPU and CPU must agree exactly.
std::vector<std::pair<std::string, JobSpec>> exact_jobs() {
  std::vector<std::pair<std::string, JobSpec>> jobs;
  jobs.emplace_back("DeepOps-like (x+1)[::2, ::2], ragged edge chunks",
                    arange_job(1000, 1000, 300, 170));
  {
    JobSpec s = arange_job(1000, 1000, 128, 96);
    s.param0 = -5;
    s.param1 = 3;
    s.scale = 2;
    s.offset = -7;
    s.row_sel = Slice{3, 997, 7};
    s.col_sel = Slice{11, 900, 5};
    jobs.emplace_back("arange(-5, 3), 2x-7, [3:997:7, 11:900:5]", s);
  }
  {
    JobSpec s = arange_job(1000, 1000, 256, 200);
    s.dtype = DType::kFloat32;
    s.scale = 0.5;
    s.offset = 0.25;
    s.row_sel = Slice{1, kToEnd, 3};
    s.col_sel = Slice{2, kToEnd, 4};
    jobs.emplace_back("float32 arange, 0.5x+0.25, [1::3, 2::4]", s);
  }
  {
    JobSpec s = arange_job(777, 333, 100, 100);
    s.dtype = DType::kFloat32;
    s.generator = Generator::kConstant;
    s.param0 = 2.5;
    s.offset = 0;
    s.row_sel = Slice{0, kToEnd, 1};
    s.col_sel = Slice{0, kToEnd, 1};
    jobs.emplace_back("float32 constant(2.5), everything", s);
  }
  {
    JobSpec s = arange_job(1, 100000, 10000, 30000);
    s.col_sel = Slice{5, 99999, 3};
    jobs.emplace_back("1-D array, [5:99999:3]", s);
  }
  {
    JobSpec s = arange_job(5000, 1, 700, 10);
    s.row_sel = Slice{1, kToEnd, 3};
    s.col_sel = Slice{0, kToEnd, 1};
    jobs.emplace_back("column vector, narrow chunks", s);
  }
  {
    JobSpec s = arange_job(1000, 800, 100, 100);
    s.row_sel = Slice{0, 10, 1};
    jobs.emplace_back("selection in the first chunk row only (empty chunks)", s);
  }
  {
    JobSpec s = arange_job(1000, 800, 100, 100);
    s.row_sel = Slice{7, kToEnd, 450};
    s.col_sel = Slice{13, kToEnd, 333};
    jobs.emplace_back("steps longer than chunks (one element or none per chunk)", s);
  }
  return jobs;
}

}  // namespace

TEST_CASE("GPU partials equal the CPU reference exactly for arange and constant", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;
  uint64_t job_id = 0;
  for (const bool fused : {false, true}) {
    for (auto [name, spec] : exact_jobs()) {
      spec.fused = fused;
      INFO(name << (fused ? " (fused)" : ""));
      auto prepared_spec = prepared(spec);
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      for (uint64_t c = 0; c < gpu.size(); ++c) {
        INFO("chunk " << c);
        require_equal(gpu[c].partial, reduce_chunk_cpu(*prepared_spec, c, scratch));
      }
    }
  }
}

TEST_CASE("single GPU elements equal the CPU's bit for bit, uniform and normal, float64 and float32", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;

  // 100000 x 100000 (indices past 2^32), one selected element per 1000 x 1000 chunk: each
  // partial's sum is one element, unreduced. 300 of the 10000 chunks, spread over the array.
  JobSpec base = arange_job(100000, 100000, 1000, 1000);
  base.row_sel = Slice{517, kToEnd, 1000};
  base.col_sel = Slice{999, kToEnd, 1000};
  base.scale = 1;
  base.offset = 0;
  std::vector<uint64_t> chunks;
  for (uint64_t k = 0; k < 300; ++k) chunks.push_back((k * 33 + k % 100) % 10000);
  chunks.push_back(9999);  // the last element of the array
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());

  JobSpec uniform = base;
  uniform.generator = Generator::kUniform;
  uniform.param0 = -3;
  uniform.param1 = 5;
  uniform.seed = 0xfeedface12345678ull;
  JobSpec normal = base;
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 2;
  normal.seed = 99;
  JobSpec normal_f32 = normal;
  normal_f32.dtype = DType::kFloat32;

  uint64_t job_id = 0;
  for (const JobSpec& job : {uniform, normal, normal_f32}) {
    for (const bool fused : {false, true}) {
      JobSpec spec = job;
      spec.fused = fused;
      INFO(describe(spec));
      auto prepared_spec = prepared(spec);
      JobSpec cpu_spec = *prepared_spec;
      cpu_spec.fused = true;  // the same values; the CPU need not create 10^6 elements per chunk
      const auto gpu = run_chunks(*backend, outcomes, prepared_spec, ++job_id, chunks);
      for (const auto& [chunk, outcome] : gpu) {
        INFO("chunk " << chunk);
        const PartialSum cpu = reduce_chunk_cpu(cpu_spec, chunk, scratch);
        REQUIRE(cpu.count == 1);
        CHECK(outcome.partial.count == 1);
        CHECK(outcome.partial.sum == cpu.sum);  // one element: its sum is the element
        CHECK(outcome.partial.min == outcome.partial.sum);
        CHECK(outcome.partial.max == outcome.partial.sum);
      }
    }
  }
}

TEST_CASE("GPU partials of normal and uniform have the CPU's count, min and max bits and its sum to rounding", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;

  JobSpec normal = arange_job(2000, 1500, 512, 384);
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 1;
  normal.seed = 42;
  JobSpec uniform = arange_job(1800, 1300, 500, 400);
  uniform.generator = Generator::kUniform;
  uniform.param0 = 2;
  uniform.param1 = 5;
  uniform.seed = 7;
  uniform.dtype = DType::kFloat32;
  uniform.row_sel = Slice{1, kToEnd, 3};
  uniform.col_sel = Slice{0, kToEnd, 5};

  uint64_t job_id = 0;
  for (const JobSpec& base : {normal, uniform}) {
    for (const bool fused : {false, true}) {
      JobSpec spec = base;
      spec.fused = fused;
      INFO(describe(spec));
      auto prepared_spec = prepared(spec);
      // The elements are bit-identical (docs/design.md, "The element definition"), so the minima
      // and maxima are too; the sums are summed in different orders.
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      for (uint64_t c = 0; c < gpu.size(); ++c) {
        INFO("chunk " << c);
        const PartialSum cpu = reduce_chunk_cpu(*prepared_spec, c, scratch);
        CHECK(gpu[c].partial.count == cpu.count);
        CHECK(near_rel(gpu[c].partial.sum, cpu.sum, 1e-12));
        CHECK(gpu[c].partial.min == cpu.min);
        CHECK(gpu[c].partial.max == cpu.max);
      }
    }
  }
}

TEST_CASE("fused chunks agree with materialized chunks on the GPU", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());

  JobSpec normal = arange_job(3000, 2000, 1000, 1000);
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 1;
  normal.seed = 1234;
  JobSpec uniform_f32 = normal;
  uniform_f32.generator = Generator::kUniform;
  uniform_f32.param0 = -1;
  uniform_f32.param1 = 3;
  uniform_f32.dtype = DType::kFloat32;
  uniform_f32.row_sel = Slice{5, 2900, 3};

  uint64_t job_id = 0;
  for (const JobSpec& base : {normal, uniform_f32}) {
    INFO(describe(base));
    JobSpec fused = base;
    fused.fused = true;
    const auto materialized_out = run_job(*backend, outcomes, prepared(base), ++job_id);
    const auto fused_out = run_job(*backend, outcomes, prepared(fused), ++job_id);
    for (uint64_t c = 0; c < fused_out.size(); ++c) {
      INFO("chunk " << c);
      const PartialSum m = expand(materialized_out[c].partial);
      const PartialSum f = expand(fused_out[c].partial);
      CHECK(f.count == m.count);
      // The same element values on both paths, and exact sums: the same bits.
      CHECK(same_value(f.exact, m.exact));
      CHECK(f.sum == m.sum);
      CHECK(f.min == m.min);
      CHECK(f.max == m.max);
    }
  }
}

int main(int argc, char* argv[]) {
  std::string why;
  const int devices = cuda_device_count(&why);
  if (devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  std::printf("psched_cuda_tests: %d CUDA device(s)\n", devices);
  return Catch::Session().run(argc, argv);
}
