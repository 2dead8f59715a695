#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/chunk_runs.h"
#include "core/closed_form.h"
#include "scheduler/partial_check.h"

using namespace psched;

namespace {

// arange over a 7 x 10 array in 3 x 4 chunks (3 x 3 grid, edge chunks smaller), every second
// column from 1: elements are exact, so expected_run_partial is what an honest worker reports.
JobSpec small_job() {
  JobSpec s;
  s.rows = 7;
  s.cols = 10;
  s.chunk_rows = 3;
  s.chunk_cols = 4;
  s.generator = Generator::kArange;
  s.param0 = 0;
  s.param1 = 1;
  s.offset = 0;
  s.row_sel = Slice{0, kToEnd, 1};
  s.col_sel = Slice{1, kToEnd, 2};
  return normalized(s);
}

ReportedPartial honest(const JobSpec& s, ChunkRange range) {
  const PartialSum truth = *expected_run_partial(s, range.first, range.count);
  ReportedPartial p;
  p.range = range;
  p.sum = truth.sum;
  p.count = truth.count;
  p.min = truth.min;
  p.max = truth.max;
  note_terms(truth.exact.terms(), p);
  return p;
}

}  // namespace

TEST_CASE("selected_elements of a run is the sum of its chunks' selections, for any run and selection",
          "[partial_check]") {
  std::mt19937_64 rng(49);
  for (int round = 0; round < 2000; ++round) {
    JobSpec s;
    s.rows = 1 + rng() % 40;
    s.cols = 1 + rng() % 40;
    s.chunk_rows = 1 + rng() % 9;
    s.chunk_cols = 1 + rng() % 9;
    s.row_sel = Slice{rng() % 8, rng() % 3 == 0 ? kToEnd : rng() % 45, 1 + rng() % 5};
    s.col_sel = Slice{rng() % 8, rng() % 3 == 0 ? kToEnd : rng() % 45, 1 + rng() % 5};
    s = normalized(s);
    const ChunkGrid g = s.grid();
    const uint64_t first = rng() % g.chunks(), count = 1 + rng() % (g.chunks() - first);
    uint64_t model = 0;
    for (uint64_t c = first; c < first + count; ++c) {
      const ChunkBox b = g.box(c);
      model += select_axis(b.row0, b.row0 + b.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step).count *
               select_axis(b.col0, b.col0 + b.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step).count;
    }
    INFO("round " << round << ": chunks " << first << " +" << count);
    REQUIRE(selected_elements(s, first, count) == model);
  }
}

TEST_CASE("an honest partial passes for every run, a single chunk to the whole grid", "[partial_check]") {
  const JobSpec s = small_job();
  for (uint64_t first = 0; first < s.chunks(); ++first)
    for (uint64_t count = 1; first + count <= s.chunks(); ++count) {
      INFO("chunks " << first << " +" << count);
      CHECK(untrue_partial(s, honest(s, ChunkRange{first, count})) == "");
    }
}

TEST_CASE("a lying partial is refused saying what cannot be true", "[partial_check]") {
  const JobSpec s = small_job();
  const ChunkRange chunk0{0, 1};  // rows 0-2, cols 0-3: columns 1 and 3 selected, 6 elements
  ReportedPartial p = honest(s, chunk0);
  REQUIRE(p.count == 6);

  SECTION("a count off by one, or of 2^64 - 1") {
    p.count = 7;
    CHECK(untrue_partial(s, p) == "count 7, but the selection has 6 elements there");
    p.count = std::numeric_limits<uint64_t>::max();
    CHECK(untrue_partial(s, p) == "count 18446744073709551615, but the selection has 6 elements there");
  }
  SECTION("a NaN or infinite exact term") {
    note_terms(std::vector<double>{1.0, std::nan(""), 2.0}, p);
    CHECK(untrue_partial(s, p) == "exact sum term 2 of 3 is nan (NaN and infinite elements are counted, never added)");
    note_terms(std::vector<double>{-std::numeric_limits<double>::infinity()}, p);
    CHECK(untrue_partial(s, p) == "exact sum term 1 of 1 is -inf (NaN and infinite elements are counted, never added)");
  }
  SECTION("one infinite term alone: a stored float array's sum past DBL_MAX, and no other job's") {
    const double inf = std::numeric_limits<double>::infinity();
    note_terms(std::vector<double>{inf}, p);
    p.sum = inf;
    CHECK(untrue_partial(s, p) == "exact sum term 1 of 1 is inf (NaN and infinite elements are counted, never added)");
    JobSpec stored = s;
    stored.stored.kind = SourceKind::kNpy;
    CHECK(untrue_partial(stored, p) == "");
    note_terms(std::vector<double>{inf, 1.0}, p);
    CHECK(untrue_partial(stored, p) == "exact sum term 1 of 2 is inf (NaN and infinite elements are counted, never added)");
  }
  SECTION("more NaN and infinite elements than counted") {
    p.nan = 4;
    p.pos_inf = 3;
    CHECK(untrue_partial(s, p) == "7 NaN and infinite elements among 6 counted");
  }
  SECTION("min above max, or NaN, while an element is not NaN") {
    p.min = 5;
    p.max = 4;
    CHECK(untrue_partial(s, p) == "min 5 above max 4 with 6 counted");
    p.min = std::nan("");
    CHECK(untrue_partial(s, p) == "min nan above max 4 with 6 counted");
  }
  SECTION("a range of NaN elements alone keeps the empty min and max, and its sum is NaN") {
    p.nan = 6;
    p.min = std::numeric_limits<double>::infinity();
    p.max = -std::numeric_limits<double>::infinity();
    p.sum = std::nan("");
    note_terms(std::vector<double>{}, p);
    CHECK(untrue_partial(s, p) == "");
  }
  SECTION("a NaN sum with no NaN or infinite element") {
    p.sum = std::nan("");
    CHECK(untrue_partial(s, p) == "sum nan of finite elements");
  }
}

TEST_CASE("a var/std job's partial carries a sum of squares that can be true, a sum-only job's none",
          "[partial_check]") {
  const double inf = std::numeric_limits<double>::infinity();
  JobSpec s = small_job();
  ReportedPartial p = honest(s, ChunkRange{0, 1});  // 6 finite elements
  SECTION("squares only where the job asked for them") {
    p.squares.present = true;
    note_terms(std::vector<double>{91.0}, p.squares);
    CHECK(untrue_partial(s, p) == "a sum of squares in a partial of a job that asked for none");
    s.squares = true;
    CHECK(untrue_partial(s, p) == "");
    p.squares = ReportedSquares{};
    CHECK(untrue_partial(s, p) == "no sum of squares in a partial of a var/std job");
  }
  s.squares = true;
  p.squares.present = true;
  note_terms(std::vector<double>{91.0, 1e-20}, p.squares);
  REQUIRE(untrue_partial(s, p) == "");
  SECTION("finite, not negative terms, or one +inf alone (a sum past DBL_MAX)") {
    note_terms(std::vector<double>{91.0, std::nan("")}, p.squares);
    CHECK(untrue_partial(s, p) == "sum of squares term 2 of 2 is nan");
    note_terms(std::vector<double>{-inf}, p.squares);
    CHECK(untrue_partial(s, p) == "sum of squares term 1 of 1 is -inf");
    note_terms(std::vector<double>{inf, 1.0}, p.squares);
    CHECK(untrue_partial(s, p) == "sum of squares term 1 of 2 is inf");
    note_terms(std::vector<double>{-2.0, 1e-20}, p.squares);
    CHECK(untrue_partial(s, p) == "sum of squares -2 is negative");
    note_terms(std::vector<double>{inf}, p.squares);
    CHECK(untrue_partial(s, p) == "");
  }
  SECTION("the squares' special counts follow the elements'") {
    p.squares.neg_inf = 1;
    CHECK(untrue_partial(s, p) == "1 squares of -inf (a square is never negative)");
    p.squares.neg_inf = 0;
    p.squares.nan = 1;
    CHECK(untrue_partial(s, p) == "1 NaN squares but 0 NaN elements");
    p.squares.nan = 0;
    p.squares.pos_inf = 6;  // every square overflowed: possible
    CHECK(untrue_partial(s, p) == "");
    p.squares.pos_inf = 7;
    CHECK(untrue_partial(s, p) == "7 infinite squares of 0 infinite and 6 other elements");
    p.nan = 1;
    p.neg_inf = 2;
    p.squares.nan = 1;
    p.squares.pos_inf = 1;
    CHECK(untrue_partial(s, p) == "1 infinite squares of 2 infinite and 3 other elements");
    p.squares.pos_inf = 2;
    CHECK(untrue_partial(s, p) == "");
  }
}
