// var/std jobs (JobSpec::squares) on the GPU: every chunk's partial, its exact sum of squares
// included, has the CPU backend's bits (worker/cpu/reduce.h), because both sum the same terms (each
// square split exactly as h + l, reduce_block.cuh's take and worker/cpu/reduce_impl.h) and exact
// addition ignores order. Every generator and dtype, fused and materialized, big chunks
// and batches, selections and scale/offset, data whose squares overflow or underflow, and a chunk
// large enough that its blocks carry. A sum-only job's partials carry no squares.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_test_support.h"
#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "storage/open.h"
#include "worker/cuda/batching.h"

using namespace psched;
using namespace psched::gpu_test;

namespace {

// Every chunk of the job through the backend and through the CPU reference: the same bits,
// squares included, as both send them (CompactPartial: a sum of squares past DBL_MAX is sent as
// +inf, see core/variance.h).
void require_same_bits_as_cpu(Backend& backend, Outcomes& outcomes, JobSpec spec, uint64_t job_id) {
  spec.squares = true;
  const auto prepared_spec = prepared(spec);
  const auto gpu = run_job(backend, outcomes, prepared_spec, job_id);
  std::vector<double> scratch;
  for (const ChunkOutcome& o : gpu) {
    INFO("chunk " << o.chunk);
    const PartialSum cpu = reduce_chunk_cpu(*prepared_spec, o.chunk, scratch);
    REQUIRE(cpu.has_squares);
    CHECK(o.partial.has_squares);
    CHECK(same_bits(expand(o.partial), expand(compact(cpu))));
  }
}

JobSpec generated(Generator kind, DType dtype, uint64_t rows, uint64_t cols, uint64_t chunk_rows,
                  uint64_t chunk_cols) {
  JobSpec s = arange_job(rows, cols, chunk_rows, chunk_cols);
  s.generator = kind;
  s.dtype = dtype;
  if (kind == Generator::kNormal) {
    s.param0 = 10;
    s.param1 = 1;
  } else if (kind == Generator::kUniform) {
    s.param0 = -3;
    s.param1 = 1e6;
  } else if (kind == Generator::kConstant) {
    s.param0 = 0.1;
  }
  s.seed = 7;
  return s;
}

}  // namespace

TEST_CASE("var/std jobs: GPU partials and their sums of squares have the CPU's bits", "[gpu][squares]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  uint64_t job_id = 0;
  for (const Generator kind : {Generator::kNormal, Generator::kUniform, Generator::kArange, Generator::kConstant}) {
    for (const DType dtype : {DType::kFloat64, DType::kFloat32}) {
      // Batches of mid-sized chunks with ragged edges and of small ones (big chunks, one a launch:
      // the next test).
      for (const auto& [rows, cols, chunk_rows, chunk_cols] :
           {std::tuple{5000, 4100, 2500, 2100}, std::tuple{1013, 1003, 25, 26}}) {
        for (const bool fused : {false, true}) {
          JobSpec s = generated(kind, dtype, rows, cols, chunk_rows, chunk_cols);
          s.fused = fused;
          INFO("generator " << int(kind) << " dtype " << int(dtype) << " " << rows << " x " << cols << " in "
                            << chunk_rows << " x " << chunk_cols << (fused ? " fused" : ""));
          require_same_bits_as_cpu(*backend, outcomes, s, ++job_id);
        }
      }
    }
  }
  {  // another expression and selection, empty chunks among them
    JobSpec s = generated(Generator::kNormal, DType::kFloat64, 1000, 800, 100, 100);
    s.scale = -3.5;
    s.offset = 1e8;  // a large mean and a small spread: what cancels in a naive variance
    s.row_sel = Slice{3, 600, 7};
    s.col_sel = Slice{11, kToEnd, 5};
    require_same_bits_as_cpu(*backend, outcomes, s, ++job_id);
  }
  backend->stop();
}

TEST_CASE("var/std on the GPU: big normal chunks, one a launch, have the CPU's bits", "[gpu][squares]") {
  // Past the batching bound each chunk is one generate launch and one reduce, the DeepOps job's
  // path: ragged edge chunks, float32 with another expression and a selection whose steps cross
  // the generate kernel's rows of blocks, and narrow rows (blocks stacked over rows).
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  JobSpec ragged = generated(Generator::kNormal, DType::kFloat64, 6500, 6100, 6000, 6000);
  JobSpec f32 = generated(Generator::kNormal, DType::kFloat32, 6200, 6000, 6200, 6000);
  f32.scale = -3.5;
  f32.offset = 1e8;
  f32.row_sel = Slice{3, 6150, 7};
  f32.col_sel = Slice{11, kToEnd, 5};
  JobSpec narrow = generated(Generator::kNormal, DType::kFloat64, 45000, 900, 45000, 900);
  narrow.row_sel = Slice{1, kToEnd, 3};
  narrow.col_sel = Slice{0, kToEnd, 1};
  uint64_t job_id = 0;
  for (const JobSpec& s : {ragged, f32, narrow}) {
    REQUIRE(s.chunk_rows * s.chunk_cols > gpu::kBatchMaxChunkElements);
    INFO(s.rows << " x " << s.cols << " in " << s.chunk_rows << " x " << s.chunk_cols);
    require_same_bits_as_cpu(*backend, outcomes, s, ++job_id);
  }
  backend->stop();
}

TEST_CASE("var/std on the GPU: squares that overflow, underflow or come from NaN and infinities", "[gpu][squares]") {
  // A stored array (read as doubles, reduced by the same kernels) of values no generator makes.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("psched-gpu-squares-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const uint64_t rows = 6, cols = 4000;
  std::vector<double> v(rows * cols);
  for (uint64_t i = 0; i < cols; ++i) {
    const double x = double(i) * 0.37 - 900;
    v[0 * cols + i] = 1e8 + x * 1e-6;                                           // huge mean, tiny spread
    v[1 * cols + i] = std::ldexp(1.0, int(i % 1500) - 1000) * (i % 5 ? 1 : -1);  // squares from 2^-2000 up
    v[2 * cols + i] = i % 3 ? std::numeric_limits<double>::denorm_min() * double(i) : x * 1e-160;
    v[3 * cols + i] = i % 7 ? 1e200 : x;                                          // squares overflow
    v[4 * cols + i] = i == 17 ? nan : i == 4000 - 1 ? -inf : x;                   // specials
    v[5 * cols + i] = i % 2 ? 1.3e154 : -1.2e154;                                 // squares near the limit
  }
  const std::string bytes(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
  {
    std::ofstream out(dir / "adversarial.npy", std::ios::binary);
    out << npy_header({DType::kFloat64, false}, false, {rows, cols}) << bytes;
  }
  ArrayInput input;
  input.path = (dir / "adversarial.npy").string();
  auto array = open_array(input);
  REQUIRE(array.is_ok());
  JobSpec s = whole_array_job(*array);
  s.chunk_rows = 1;  // a chunk per kind of data
  s.chunk_cols = cols;
  s.squares = true;
  const auto spec = prepared(s);

  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  const auto gpu = run_job(*backend, outcomes, spec, 1);
  ChunkReader reader;
  std::vector<double> scratch;
  for (const ChunkOutcome& o : gpu) {
    INFO("chunk " << o.chunk);
    PartialSum cpu;
    REQUIRE(reduce_stored_chunk_cpu(*spec, o.chunk, reader, scratch, cpu).is_ok());
    CHECK(same_bits(expand(o.partial), expand(compact(cpu))));
  }
  // The squares that overflowed are counted as +inf, as numpy's x*x gives; a NaN's square is NaN;
  // squares each finite whose sum passes DBL_MAX are sent as +inf (their exact sum, too).
  CHECK(expand(gpu[3].partial).squares.pos_inf > 0);
  CHECK(expand(gpu[4].partial).squares.nan == 1);
  CHECK(gpu[5].partial.squares.rounded() == std::numeric_limits<double>::infinity());
  CHECK(expand(gpu[0].partial).squares.pos_inf == 0);
  backend->stop();
  fs::remove_all(dir);
}

TEST_CASE("var/std on the GPU: a chunk of more than 2^29 selected elements carries its blocks", "[gpu][squares]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  JobSpec s = generated(Generator::kUniform, DType::kFloat32, 24000, 24000, 24000, 24000);  // 5.76e8
  s.row_sel = Slice{0, kToEnd, 1};
  s.col_sel = Slice{0, kToEnd, 1};
  s.param0 = -1e30;  // squares far apart: many digits
  s.param1 = 1e30;
  require_same_bits_as_cpu(*backend, outcomes, s, 1);
  backend->stop();
}

TEST_CASE("a sum-only job's GPU partials carry no squares", "[gpu][squares]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  const auto gpu = run_job(*backend, outcomes, prepared(arange_job(1000, 1000, 100, 100)), 1);
  for (const ChunkOutcome& o : gpu) CHECK_FALSE(o.partial.has_squares);
  backend->stop();
}
