// The closed-form chunk partial that simulated workers (bench/loadgen) answer with must be the bits
// a real CPU worker reports for the same chunk: compared here chunk by chunk with reduce_chunk_cpu.
#include <catch2/catch.hpp>

#include <cstring>
#include <tuple>

#include "core/chunk_grid.h"
#include "core/closed_form.h"
#include "worker/cpu/reduce.h"

using namespace psched;

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("closed-form chunk partials are bit-identical to the CPU reduction of every chunk",
          "[closed_form]") {
  int checked = 0;
  for (Generator g : {Generator::kArange, Generator::kConstant}) {
    for (uint64_t rows : {1, 7, 20}) {
      for (uint64_t cols : {9, 33}) {
        for (uint64_t chunk : {1, 4, 10}) {
          for (uint64_t step : {1, 2, 3}) {
            JobSpec s;
            s.generator = g;
            s.param0 = 3;
            s.param1 = 2;
            s.rows = rows;
            s.cols = cols;
            s.chunk_rows = chunk;
            s.chunk_cols = chunk + 1;
            s.row_sel = {0, kToEnd, step};
            s.col_sel = {1, cols - 1, step + 1};
            s.scale = 2;
            s.offset = -1;
            REQUIRE(validate(s));
            const JobSpec n = normalized(s);
            INFO(describe(s));
            std::vector<double> scratch;
            const ChunkGrid grid{n.rows, n.cols, n.chunk_rows, n.chunk_cols};
            for (uint64_t k = 0; k < grid.chunks(); ++k) {
              INFO("chunk " << k);
              const PartialSum cpu = reduce_chunk_cpu(n, k, scratch);
              const std::optional<PartialSum> closed = expected_chunk_partial(s, k);
              REQUIRE(closed.has_value());
              CHECK(closed->count == cpu.count);
              CHECK(same_bits(closed->sum, cpu.sum));
              CHECK(same_value(closed->exact, cpu.exact));
              if (cpu.count > 0) {
                CHECK(same_bits(closed->min, cpu.min));
                CHECK(same_bits(closed->max, cpu.max));
              }
              ++checked;
            }
          }
        }
      }
    }
  }
  CHECK(checked > 1000);
}

TEST_CASE("chunk partials combined in order give the job's closed form exactly", "[closed_form]") {
  JobSpec s;
  s.generator = Generator::kConstant;
  s.param0 = 1;
  s.rows = 1000000;
  s.cols = 1000000;
  s.chunk_rows = 10000;
  s.chunk_cols = 10000;  // the 8 TB scale run of bench/scale.sh: (x + 1)[::2, ::2]
  REQUIRE(validate(s));
  PartialSum total;
  for (uint64_t k = 0; k < 10000; ++k) merge(total, *expected_chunk_partial(s, k));
  const Expectation e = expected_result(s);
  REQUIRE(e.sum_exact);
  CHECK(total.sum == e.sum);
  CHECK(total.count == 250000000000u);
  CHECK(check_result(s, total) == "");
}

TEST_CASE("a run's closed-form partial is its chunks' partials merged, for every run of a ragged grid",
          "[closed_form]") {
  JobSpec s;
  s.generator = Generator::kArange;
  s.param0 = -3000;  // integers of both signs: min, max and the exact sum all move
  s.param1 = 7;
  s.rows = 23;
  s.cols = 17;
  s.chunk_rows = 4;
  s.chunk_cols = 5;  // 6 x 4 chunks, the last row and column ragged
  s.row_sel = Slice{1, 23, 3};
  s.col_sel = Slice{0, 17, 2};
  REQUIRE(validate(s));
  const uint64_t chunks = s.chunks();
  int checked = 0;
  for (uint64_t first = 0; first < chunks; ++first) {
    PartialSum merged;
    for (uint64_t n = 1; first + n <= chunks; ++n) {
      merge(merged, *expected_chunk_partial(s, first + n - 1));
      const std::optional<PartialSum> run = expected_run_partial(s, first, n);
      REQUIRE(run);
      INFO("chunks " << first << " + " << n);
      CHECK(run->sum == merged.sum);
      CHECK(run->exact.rounded() == merged.exact.rounded());
      CHECK(run->count == merged.count);
      CHECK(run->min == merged.min);
      CHECK(run->max == merged.max);
      ++checked;
    }
  }
  CHECK(checked == 300);  // every run of the 24 chunks
  s.generator = Generator::kNormal;
  CHECK_FALSE(expected_run_partial(s, 0, 5).has_value());
}

namespace {

// Every run of `s`'s chunks: expected_run_compact gives compact(expected_run_partial)'s bits.
int check_compact_runs(const JobSpec& s) {
  int checked = 0;
  for (uint64_t first = 0; first < s.chunks(); ++first) {
    for (uint64_t n = 0; first + n <= s.chunks(); ++n) {
      const std::optional<PartialSum> run = expected_run_partial(s, first, n);
      const std::optional<CompactPartial> fast = expected_run_compact(s, first, n);
      INFO("chunks " << first << " + " << n);
      REQUIRE(run.has_value() == fast.has_value());
      if (!run) continue;
      const CompactPartial want = compact(*run);
      CHECK(same_bits(fast->sum, want.sum));
      CHECK(fast->count == want.count);
      CHECK(same_bits(fast->min, want.min));
      CHECK(same_bits(fast->max, want.max));
      REQUIRE(fast->exact.size() == want.exact.size());
      for (size_t t = 0; t < want.exact.size(); ++t) CHECK(same_bits(fast->exact.data()[t], want.exact.data()[t]));
      ++checked;
    }
  }
  return checked;
}

}  // namespace

TEST_CASE("a run's compact closed form (integers, no accumulator) has the bits of the general one",
          "[closed_form]") {
  JobSpec s;
  s.rows = 23;
  s.cols = 17;
  s.chunk_rows = 4;
  s.chunk_cols = 5;  // 6 x 4 chunks, the last row and column ragged
  s.row_sel = Slice{1, 23, 3};
  s.col_sel = Slice{0, 17, 2};
  int checked = 0;
  // arange with integers of both signs and a scale and offset, and elements near 2^53 (sums of
  // ~60 bits, two terms).
  s.generator = Generator::kArange;
  for (auto [start, step, scale, offset] : {std::tuple{-3000.0, 7.0, 1.0, 0.0}, std::tuple{5.0, -2.0, -3.0, 11.0},
                                           std::tuple{1e13, 1e13 + 1, 1.0, 0.0}}) {
    s.param0 = start;
    s.param1 = step;
    s.scale = scale;
    s.offset = offset;
    REQUIRE(validate(s));
    checked += check_compact_runs(s);
  }
  // constants: integers, fractions, negative, zero, tiny and huge (terms far from 2^0).
  s.generator = Generator::kConstant;
  s.scale = 1;
  s.offset = 0;
  for (double value : {1.0, 0.1, -2.5, 0.0, 0x1p-900, 0x1.fffffffffffffp+900, 3e-310}) {
    s.param0 = value;
    REQUIRE(validate(s));
    checked += check_compact_runs(s);
  }
  CHECK(checked == 10 * 324);  // every run of the 24 chunks, and the empty ones, per job
  // Not exact (a fractional arange step): neither gives one.
  s.generator = Generator::kArange;
  s.param0 = 0;
  s.param1 = 0.5;
  REQUIRE(validate(s));
  CHECK_FALSE(expected_run_compact(s, 0, 5).has_value());
}

TEST_CASE("no closed-form chunk partial where the sum could round or the generator is random",
          "[closed_form]") {
  JobSpec s;  // the seed: normal(10, 1)
  CHECK_FALSE(expected_chunk_partial(s, 0).has_value());
  s.generator = Generator::kArange;
  s.param1 = 0.5;  // non-integer values: the order of summation matters
  CHECK_FALSE(expected_chunk_partial(s, 0).has_value());
}

TEST_CASE("a constant that is no integer still has an exact closed-form partial, equal to the CPU's",
          "[closed_form]") {
  JobSpec s;
  s.generator = Generator::kConstant;
  s.param0 = 0.3;
  s.scale = 1.7;
  s.offset = 0.1;
  s.rows = 50;
  s.cols = 70;
  s.chunk_rows = 13;
  s.chunk_cols = 9;
  s.row_sel = {1, kToEnd, 1};
  s.col_sel = {0, kToEnd, 3};
  REQUIRE(validate(s));
  const JobSpec n = normalized(s);
  std::vector<double> scratch;
  PartialSum total;
  for (uint64_t k = 0; k < n.chunks(); ++k) {
    INFO("chunk " << k);
    const PartialSum cpu = reduce_chunk_cpu(n, k, scratch);
    const std::optional<PartialSum> closed = expected_chunk_partial(s, k);
    REQUIRE(closed.has_value());
    CHECK(same_bits(*closed, cpu));
    merge(total, cpu);
  }
  CHECK(check_result(s, total) == "");
}
