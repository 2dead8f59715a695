// The CPU kernels' plain lo additions (worker/cpu/reduce_impl.h, plain_adds_impl.h): taken only
// where their bound proves them exact, the exact way elsewhere, and the same bits as the scalar
// reference either way, on every build this CPU runs.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/exact_sum.h"
#include "core/partial.h"
#include "tests/worker/kernels_reference.h"
#include "worker/cpu/kernels.h"

using namespace psched;
using namespace psched::test;

namespace {

// The exact sum the lanes would give with every lo addition plain (TwoSum's first step only, no
// check), element j of the runs, one after the other, in lane j % 8 of its run: what an
// optimistic run accepted without its proof would give.
ExactSum plain_lanes_sum(const std::vector<std::vector<double>>& runs) {
  double hi[8] = {}, lo[8] = {};
  for (const std::vector<double>& run : runs) {
    for (size_t i = 0; i < run.size(); ++i) {
      const double v = run[i], h = hi[i % 8], t = h + v, bv = t - h, e = (h - (t - bv)) + (v - bv);
      hi[i % 8] = t;
      lo[i % 8] += e;
    }
  }
  ExactSum out;
  for (int l = 0; l < 8; ++l) {
    out.add(hi[l]);
    out.add(lo[l]);
  }
  out.normalize();
  return out;
}

// n elements of two magnitudes with whole random mantissas (U(1, 2) times each): every
// `every`-th `small` times one, the others `big` times one; with `signs`, every fifth negative.
std::vector<double> two_magnitudes(size_t n, size_t every, double small, double big, bool signs, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = (i % every == 0 ? small : big) * unit(rng) * (signs && i % 5 == 0 ? -1.0 : 1.0);
  return out;
}

// The runs reduced by k one call each, from fresh lanes; the lanes afterwards.
ReduceLanes reduced(const CpuKernels& k, const std::vector<std::vector<double>>& runs, PartialSum& got) {
  ReduceLanes lanes;
  lanes_init(lanes);
  for (const std::vector<double>& run : runs) k.reduce(run.data(), 1, run.size(), 1.0, 0.0, lanes);
  lanes_total(lanes, got);
  return lanes;
}

std::vector<double> joined(const std::vector<std::vector<double>>& runs) {
  std::vector<double> all;
  for (const std::vector<double>& run : runs) all.insert(all.end(), run.begin(), run.end());
  return all;
}

}  // namespace

TEST_CASE("the bound behind plain lo additions counts the lanes' start and the sums' growth", "[kernels]") {
  // Growth: values near 1 (lowest bits 2^-52) and near 2^-40 (2^-92) in one run of 10,000. Over
  // the run a lane's hi grows to ~2^11 and its lo past 2^-39 = 2^53 x 2^-92: bounded by the run's
  // first |hi| instead of its last, the proof would pass.
  const std::vector<double> growth = two_magnitudes(10000, 7, 0x1p-40, 1.0, false, 47);
  // The lanes' start: a run of ones and 2^-80s (done the exact way: its own bound fails), leaving
  // each lane hi a whole number and lo a multiple of 2^-80; 15 runs of zeros (the rest after a
  // failed proof); then values near 2^30 (lowest bits 2^-22), whose errors join lo's 2^-80s:
  // counted without lo's own lowest bit, the proof would pass.
  std::vector<std::vector<double>> start{std::vector<double>(10000)};
  for (size_t i = 0; i < start[0].size(); ++i) start[0][i] = i % 16 < 8 ? 1.0 : 0x1p-80;  // each lane both
  for (int r = 0; r < 15; ++r) start.emplace_back(300, 0.0);
  start.push_back(two_magnitudes(10000, 1, 0x1p30, 0x1p30, false, 47));
  // The start a proven run left: values near 2^-40, proven (lo's bits reach 2^-92), then the
  // values near 2^30. The second run's proof starts from the quantum the first one left in the
  // lanes; started from none, it would pass.
  const std::vector<std::vector<double>> proven{two_magnitudes(10000, 1, 0x1p-40, 0x1p-40, false, 49),
                                                start.back()};
  // And the start a proven run's tail left: 1000 values near 1 (proven), then three near 2^-90
  // after the run's whole registers (added one by one, exactly: lo holds 2^-90s), then the values
  // near 2^30: counted without the tail's lowest bits, the proof would pass.
  std::vector<std::vector<double>> tail{two_magnitudes(1000, 1, 1.0, 1.0, false, 50), start.back()};
  for (int t = 0; t < 3; ++t) tail[0].push_back(0x1.8p-90);
  const std::pair<std::vector<std::vector<double>>, uint64_t> cases[] = {
      {{growth}, 0}, {start, 0}, {proven, 1}, {tail, 1}};
  for (const auto& [runs, plain_runs] : cases) {
    const std::vector<double> all = joined(runs);
    const PartialSum want = reference_total(all, 1, all.size(), 1.0, 0.0);
    REQUIRE_FALSE(same_value(plain_lanes_sum(runs), want.exact));  // plain would have rounded
    for (const CpuKernels* k : runnable_builds()) {
      INFO(k->isa << " runs " << runs.size());
      PartialSum got;
      const ReduceLanes lanes = reduced(*k, runs, got);
      CHECK(lanes.optimistic_runs == plain_runs);
      CHECK(same_bits(got, want));
    }
  }
}

TEST_CASE("the lanes' lo additions go plain only where a bound proves them exact afterwards", "[kernels]") {
  // Rows of 10,000 elements. normal(10, 1): the bound proves every run. `mixed`: values near 2^30
  // and near 2^-40, so lo holds TwoSum's errors of both, multiples of 2^-92 up to 2^-11 and more,
  // more bits than a double holds: lo added plainly would round (checked first), and the run must
  // go the exact way.
  const uint64_t row = 10000;
  const std::vector<double> smooth = normal_data(row * 20, 46);
  const std::vector<double> mixed = two_magnitudes(row, 3, 0x1p-40, 0x1p30, true, 46);
  const PartialSum want_mixed = reference_total(mixed, 1, row, 1.0, 0.0);
  {
    double hi[8] = {}, lo[8] = {};
    for (size_t i = 0; i < mixed.size(); ++i) {
      const double v = mixed[i], h = hi[i % 8], t = h + v, bv = t - h, e = (h - (t - bv)) + (v - bv);
      hi[i % 8] = t;
      lo[i % 8] += e;
    }
    PartialSum plain = want_mixed;
    plain.exact = ExactSum{};
    for (int l = 0; l < 8; ++l) {
      plain.exact.add(hi[l]);
      plain.exact.add(lo[l]);
    }
    plain.exact.normalize();
    REQUIRE_FALSE(same_value(plain.exact, want_mixed.exact));
  }
  for (const CpuKernels* k : runnable_builds()) {
    INFO(k->isa);
    // Smooth rows: all proven.
    ReduceLanes lanes;
    lanes_init(lanes);
    for (uint64_t r = 0; r < 20; ++r) k->reduce(smooth.data() + r * row, 1, row, 1.0, 0.0, lanes);
    CHECK(lanes.optimistic_runs == 20u);
    PartialSum got;
    lanes_total(lanes, got);
    CHECK(same_bits(got, reference_total(smooth, 1, smooth.size(), 1.0, 0.0)));
    // The mixed row: not proven, added the exact way; the next kOptimismRest (15) rows go the
    // exact way without trying, then the last four are tried and proven.
    lanes_init(lanes);
    k->reduce(mixed.data(), 1, row, 1.0, 0.0, lanes);
    CHECK(lanes.optimistic_runs == 0u);
    PartialSum got_mixed;
    lanes_total(lanes, got_mixed);
    CHECK(same_bits(got_mixed, want_mixed));
    lanes_init(lanes);
    std::vector<double> all(mixed);
    k->reduce(mixed.data(), 1, row, 1.0, 0.0, lanes);
    for (uint64_t r = 0; r < 19; ++r) {
      k->reduce(smooth.data() + r * row, 1, row, 1.0, 0.0, lanes);
      all.insert(all.end(), smooth.begin() + long(r * row), smooth.begin() + long((r + 1) * row));
    }
    CHECK(lanes.optimistic_runs == 4u);
    lanes_total(lanes, got);
    CHECK(same_bits(got, reference_total(all, 1, all.size(), 1.0, 0.0)));
  }
}

TEST_CASE("a long run is proven in blocks: 2^20 zero-mean normal elements would fail as one", "[kernels]") {
  // The bound grows with the square of a run's length: 2^17 registers of normal(0, 1), whose least
  // magnitude is ~2^-20, need lo within ~2^-19 and are bounded near 2^-17. In blocks of 2^14
  // elements (2^11 registers) each proof passes with room to spare.
  std::vector<double> x = normal_data(uint64_t{1} << 20, 53);
  for (double& v : x) v -= 10.0;
  const PartialSum want = reference_total(x, 1, x.size(), 1.0, 0.0);
  for (const CpuKernels* k : runnable_builds()) {
    INFO(k->isa);
    PartialSum got;
    const ReduceLanes lanes = reduced(*k, {x}, got);
    CHECK(lanes.optimistic_runs == 64u);
    CHECK(same_bits(got, want));
  }
}

TEST_CASE("var/std's square expansions go plain only where their own bounds prove them", "[kernels]") {
  const uint64_t row = 10000;
  // Values near 1 and near 2^-26: the sum's bound holds (its errors are multiples of 2^-78 and
  // lo stays far below 2^-25), the squares' high parts' does not (multiples of 2^-104 beside sums
  // near 2^11): their lo added plainly would round (checked first).
  const std::vector<double> smooth = normal_data(row * 4, 48);
  const std::vector<double> mixed = two_magnitudes(row, 7, 0x1p-26, 1.0, false, 48);
  {
    std::vector<double> squares(mixed.size());
    for (size_t i = 0; i < mixed.size(); ++i) squares[i] = mixed[i] * mixed[i];
    ExactSum exact;
    for (const double h : squares) exact.add(h);
    exact.normalize();
    REQUIRE_FALSE(same_value(plain_lanes_sum({squares}), exact));
  }
  for (const CpuKernels* k : runnable_builds()) {
    INFO(k->isa);
    for (const bool is_mixed : {false, true}) {
      const std::vector<double>& x = is_mixed ? mixed : smooth;
      ReduceLanes lanes, sum_only;
      SquareLanes squares;
      lanes_init(lanes);
      lanes_init(sum_only);
      lanes_init(squares.high);
      lanes_init(squares.low);
      for (uint64_t r = 0; r < x.size() / row; ++r) {
        k->reduce_squares(x.data() + r * row, 1, row, 1.0, 0.0, lanes, squares);
        k->reduce(x.data() + r * row, 1, row, 1.0, 0.0, sum_only);
      }
      CHECK(sum_only.optimistic_runs == x.size() / row);
      CHECK(lanes.optimistic_runs == (is_mixed ? 0u : x.size() / row));
      PartialSum got;
      lanes_total(lanes, got);
      lanes_squares_total(squares, got);
      CHECK(same_bits(got, reference_total(x, 1, x.size(), 1.0, 0.0, /*squares=*/true)));
    }
  }
}

TEST_CASE("random runs over random windows of magnitude give the reference's bits plain or exact", "[kernels]") {
  // Each case: a few runs of random lengths whose elements are U(1, 2) x 2^e with e drawn from a
  // window of random place and width (0 to 120 binades, anywhere from the subnormals to near
  // overflow), random signs or one sign, some zeros, every element or every other, through one of
  // the transforms; summed, and with their squares, on every build, against the scalar reference.
  // Windows narrow enough for the plain adds' proofs and wide enough to fail them both come up
  // (counted).
  std::mt19937_64 rng(51);
  std::uniform_real_distribution<double> unit(1.0, 2.0);
  uint64_t proven = 0, runs_in_all = 0;
  for (int c = 0; c < 300; ++c) {
    const int width = int(rng() % 121);
    const int low = -1074 + int(rng() % (1023 + 1074 - width - 1));
    const bool signs = rng() % 2 == 0;
    const bool zeros = rng() % 4 == 0;
    const auto& [scale, offset] = kTransforms[rng() % 3];
    const uint64_t step = 1 + rng() % 2;
    std::vector<std::vector<double>> runs(1 + rng() % 4);
    for (std::vector<double>& run : runs) {
      run.resize(rng() % 3000 * step);
      for (double& v : run) {
        v = zeros && rng() % 10 == 0 ? 0.0 : std::ldexp(unit(rng), low + int(rng() % uint64_t(width + 1)));
        if (signs && rng() % 2 == 0) v = -v;
      }
    }
    const std::vector<double> all = joined(runs);
    const PartialSum want = reference_total(all, step, all.size() / step, scale, offset);
    const PartialSum want_squares =
        reference_total(all, step, all.size() / step, scale, offset, /*squares=*/true);
    for (const CpuKernels* k : runnable_builds()) {
      INFO(k->isa << " case " << c << " window 2^" << low << " + " << width << (signs ? " signs" : "")
                  << (zeros ? " zeros" : "") << " step " << step << " scale " << scale << " offset " << offset);
      ReduceLanes lanes, with_squares;
      SquareLanes squares;
      lanes_init(lanes);
      lanes_init(with_squares);
      lanes_init(squares.high);
      lanes_init(squares.low);
      for (const std::vector<double>& run : runs) {
        k->reduce(run.data(), step, run.size() / step, scale, offset, lanes);
        k->reduce_squares(run.data(), step, run.size() / step, scale, offset, with_squares, squares);
      }
      proven += lanes.optimistic_runs;
      runs_in_all += runs.size();
      PartialSum got;
      lanes_total(lanes, got);
      CHECK(same_bits(got, want));
      PartialSum got_squares;
      lanes_total(with_squares, got_squares);
      lanes_squares_total(squares, got_squares);
      CHECK(same_bits(got_squares, want_squares));
    }
  }
  INFO("proven runs " << proven << " of " << runs_in_all);
  CHECK(proven > runs_in_all / 10);
  CHECK(proven < runs_in_all * 9 / 10);
}
