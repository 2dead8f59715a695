// Small chunks travel through the CUDA backend in batches (one generate and one reduce launch
// for many chunks). A chunk's partial must not depend on the batch it shared: the same bits whether
// chunks are run one at a time, in runs of 7, or a thousand at once; and exact against the CPU
// reference wherever the sums are exact.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/reader_share.h"
#include "gpu_test_support.h"
#include "worker/cuda/kernels.cuh"

using namespace psched;
using namespace psched::gpu_test;

namespace {

// Runs every chunk of the job in runs of `run` chunks, each run finished before the next is
// enqueued, so no batch holds more than `run` chunks. Outcomes indexed by chunk.
std::vector<PartialSum> partials_in_runs(Backend& backend, Outcomes& outcomes,
                                         const std::shared_ptr<const JobSpec>& spec,
                                         uint64_t job_id, uint64_t run) {
  const uint64_t chunks = chunk_count(*spec);
  for (uint64_t first = 0; first < chunks; first += run) {
    const uint64_t n = std::min(run, chunks - first);
    backend.enqueue_run(job_id, first, n, spec);
    REQUIRE(outcomes.wait_for(first + n, job_id));
  }
  std::vector<PartialSum> partials(chunks);
  std::vector<int> seen(chunks, 0);
  for (const ChunkOutcome& o : outcomes.of_job(job_id)) {
    INFO("chunk " << o.chunk << ": " << o.error);
    REQUIRE(o.ok);
    REQUIRE(o.chunk < chunks);
    partials[o.chunk] = expand(o.partial);
    ++seen[o.chunk];
  }
  for (uint64_t c = 0; c < chunks; ++c) REQUIRE(seen[c] == 1);
  return partials;
}

void require_same_bits(const PartialSum& a, const PartialSum& b) {
  CHECK(a.count == b.count);
  CHECK(std::memcmp(&a.sum, &b.sum, sizeof(double)) == 0);
  CHECK(same_value(a.exact, b.exact));
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);
}

// Every generator and dtype on a ragged grid (edge chunks in both directions) with steps and an
// expression: 41 x 39 = 1599 chunks of at most 25 x 26 elements.
std::vector<std::pair<std::string, JobSpec>> batch_jobs() {
  std::vector<std::pair<std::string, JobSpec>> jobs;
  for (Generator g : {Generator::kNormal, Generator::kUniform, Generator::kArange,
                      Generator::kConstant}) {
    for (DType d : {DType::kFloat64, DType::kFloat32}) {
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
      jobs.emplace_back(std::string(generator_name(g)) + " " + dtype_name(d), s);
    }
  }
  {
    JobSpec s = arange_job(3000, 2900, 1000, 700);  // several tiles per chunk, ragged
    s.row_sel = Slice{0, kToEnd, 1};
    s.col_sel = Slice{3, kToEnd, 1};
    jobs.emplace_back("arange, tiles per chunk > 1, no steps", s);
  }
  {
    JobSpec s = arange_job(300, 300, 1, 1);  // one-element chunks
    s.generator = Generator::kNormal;
    s.row_sel = Slice{0, kToEnd, 1};
    s.col_sel = Slice{0, kToEnd, 1};
    jobs.emplace_back("normal, one-element chunks", s);
  }
  return jobs;
}

bool exact(const JobSpec& s) {
  return s.generator == Generator::kArange || s.generator == Generator::kConstant;
}

}  // namespace

TEST_CASE("a chunk's partial has the same bits in batches of 1, 7 and 1000 chunks", "[gpu]") {
  auto backend = backend_with();
  Outcomes outcomes;
  backend->start(outcomes.callback());
  uint64_t job_id = 0;
  for (const auto& [name, spec] : batch_jobs()) {
    SECTION(name) {
      const auto prepared_spec = prepared(spec);
      REQUIRE(gpu::batched(*prepared_spec));
      const uint64_t chunks = chunk_count(*prepared_spec);
      const auto one = partials_in_runs(*backend, outcomes, prepared_spec, ++job_id, 1);
      const auto seven = partials_in_runs(*backend, outcomes, prepared_spec, ++job_id, 7);
      const auto thousand = partials_in_runs(*backend, outcomes, prepared_spec, ++job_id, 1000);
      ChunkBuffer scratch;
      for (uint64_t c = 0; c < chunks; ++c) {
        INFO(name << " chunk " << c);
        require_same_bits(one[c], seven[c]);
        require_same_bits(one[c], thousand[c]);
        const PartialSum cpu = expand(reduce_chunk_cpu(*prepared_spec, c, scratch));
        CHECK(one[c].count == cpu.count);
        if (exact(*prepared_spec) || cpu.count == 0) {  // empty: sum 0, min +inf, max -inf
          require_equal(one[c], cpu);
        } else {
          CHECK(near_abs_rel(one[c].sum, cpu.sum, 1e-12));  // summed in other orders
          CHECK(one[c].min == cpu.min);  // the elements themselves are bit-identical
          CHECK(one[c].max == cpu.max);
        }
      }
      PartialSum a, b;  // merged as the scheduler merges results
      for (const PartialSum& p : one) merge(a, p);
      for (const PartialSum& p : thousand) merge(b, p);
      require_same_bits(a, b);
    }
  }
  backend->stop();
}

TEST_CASE("batched jobs fused and materialized agree; fused batches keep their bits", "[gpu]") {
  auto backend = backend_with();
  Outcomes outcomes;
  backend->start(outcomes.callback());
  JobSpec s = arange_job(2000, 2000, 100, 150);
  s.generator = Generator::kArange;
  const auto materialized = prepared(s);
  s.fused = true;
  const auto fused = prepared(s);
  const auto m = partials_in_runs(*backend, outcomes, materialized, 1, 100000);
  const auto f1 = partials_in_runs(*backend, outcomes, fused, 2, 1);
  const auto f2 = partials_in_runs(*backend, outcomes, fused, 3, 100000);
  for (size_t c = 0; c < m.size(); ++c) {
    INFO("chunk " << c);
    require_same_bits(m[c], f1[c]);
    require_same_bits(f1[c], f2[c]);
  }
  backend->stop();
}

TEST_CASE("the CUDA backend asks for a window of elements that covers a batch per slot", "[gpu]") {
  auto backend = backend_with();
  CHECK(backend->window_elements() >= uint64_t(backend->slots()) * gpu::kBatchMaxChunkElements);
}

TEST_CASE("the CUDA backend announces its stored-array readers: the scheduler gives a stored job a chunk each",
          "[gpu]") {
  CHECK(backend_with()->readers() == psched::readers_per_gpu(1));
  CudaBackendOptions options;
  options.readers = 5;
  CHECK(backend_with(options)->readers() == 5);
}
