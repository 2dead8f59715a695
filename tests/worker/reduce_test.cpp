#include <catch2/catch.hpp>

#include "core/chunk_grid.h"
#include "core/closed_form.h"
#include "worker/cpu/reduce.h"

using namespace psched;

namespace {

PartialSum run_all_chunks(const JobSpec& raw) {
  const JobSpec s = normalized(raw);
  const ChunkGrid grid{s.rows, s.cols, s.chunk_rows, s.chunk_cols};
  std::vector<double> scratch;
  PartialSum total;  // merged as the scheduler merges results
  for (uint64_t k = 0; k < grid.chunks(); ++k) merge(total, reduce_chunk_cpu(s, k, scratch));
  return total;
}

}  // namespace

TEST_CASE("CPU reduction of arange matches the closed form exactly for many chunkings", "[reduce]") {
  for (uint64_t rows : {1, 7, 20}) {
    for (uint64_t cols : {1, 9, 33}) {
      for (uint64_t chunk : {1, 4, 10, 64}) {
        for (uint64_t step : {1, 2, 3}) {
          JobSpec s;
          s.generator = Generator::kArange;
          s.param0 = 3;
          s.param1 = 2;
          s.rows = rows;
          s.cols = cols;
          s.chunk_rows = chunk;
          s.chunk_cols = chunk + 1;
          s.row_sel = {0, kToEnd, step};
          s.col_sel = {1 % cols, kToEnd, step + 1};
          s.scale = 2;
          s.offset = -1;
          REQUIRE(validate(s));
          INFO(describe(s));
          CHECK(check_result(s, run_all_chunks(s)) == "");
        }
      }
    }
  }
}

TEST_CASE("fused and materialized CPU paths give the same bits", "[reduce]") {
  JobSpec s;
  s.rows = 50;
  s.cols = 70;
  s.chunk_rows = 16;
  s.chunk_cols = 24;
  s.seed = 9;
  const PartialSum a = run_all_chunks(s);
  s.fused = true;
  const PartialSum b = run_all_chunks(s);
  CHECK(a.sum == b.sum);
  CHECK(a.count == b.count);
  CHECK(a.min == b.min);
  CHECK(a.max == b.max);
}

TEST_CASE("float32 arrays store rounded values", "[reduce]") {
  JobSpec s;
  s.generator = Generator::kConstant;
  s.param0 = 0.1;
  s.rows = s.cols = 4;
  s.chunk_rows = s.chunk_cols = 4;
  s.row_sel = s.col_sel = {0, kToEnd, 1};
  s.offset = 0;
  s.dtype = DType::kFloat32;
  const PartialSum p = run_all_chunks(s);
  CHECK(p.min == double(0.1f));
  CHECK(p.count == 16);
}

TEST_CASE("the backend's compact partial has the reference partial's bits", "[reduce]") {
  // reduce_chunk_cpu into a ChunkBuffer (the CPU backend's path, CompactPartial) against the
  // reference into a vector (PartialSum): same sum, count, min, max and exact value, for normal
  // data (wide sums, two terms) and arange of both signs (negative sums take the general split).
  for (Generator g : {Generator::kNormal, Generator::kArange}) {
    for (double offset : {1.0, -1e9}) {
      JobSpec s;
      s.generator = g;
      s.param0 = g == Generator::kNormal ? 10 : -50;
      s.param1 = g == Generator::kNormal ? 1 : 0.25;
      s.rows = 300;
      s.cols = 200;
      s.chunk_rows = 70;
      s.chunk_cols = 90;
      s.row_sel = {0, kToEnd, 2};
      s.col_sel = {1, kToEnd, 3};
      s.offset = offset;
      REQUIRE(validate(s));
      const JobSpec n = normalized(s);
      std::vector<double> scratch;
      ChunkBuffer buffer;
      for (uint64_t k = 0; k < n.chunks(); ++k) {
        INFO(describe(n) << " chunk " << k);
        const PartialSum want = reduce_chunk_cpu(n, k, scratch);
        const CompactPartial got = reduce_chunk_cpu(n, k, buffer);
        CHECK(same_bits(expand(got), want));
      }
    }
  }
}
