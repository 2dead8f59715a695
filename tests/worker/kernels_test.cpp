#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "core/generators.h"
#include "core/partial.h"
#include "tests/support/edge_normal_words.h"
#include "worker/cpu/kernels.h"

using namespace psched;

namespace {

// Every build this CPU can run (the baseline always).
std::vector<const CpuKernels*> runnable_builds() {
  std::vector<const CpuKernels*> out;
  for (const char* isa : {"baseline", "avx2", "avx512"})
    if (const CpuKernels* k = cpu_kernels_for(isa)) out.push_back(k);
  return out;
}

std::vector<double> generated(const CpuKernels& k, const GeneratorParams& g, uint64_t first,
                              uint64_t stride, uint64_t n, bool to_float = false) {
  std::vector<double> out(n);
  k.generate(g, to_float, first, stride, n, out.data(), /*streaming=*/false);
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// Indices that reach past 2^32 and 2^53 as well as the start of the array.
const uint64_t kFirsts[] = {0, 5, (uint64_t{1} << 32) - 3, uint64_t{1} << 40, (uint64_t{1} << 53) + 1,
                            ~uint64_t{0} - 100};

}  // namespace

TEST_CASE("CPU kernels give every generator bit for bit as element_value, float32 as its rounding", "[kernels]") {
  const GeneratorParams gens[] = {{Generator::kArange, 5.0, 3.0, 0}, {Generator::kArange, -0.1, 1e-3, 0}, {Generator::kConstant, 2.5, 0.0, 0},
                                  {Generator::kUniform, -2.0, 3.0, 7}, {Generator::kUniform, 0.0, 1.0, 0xdeadbeefcafef00du},
                                  {Generator::kNormal, 10.0, 1.0, 42}, {Generator::kNormal, 0.0, 1.0, ~uint64_t{0}}};
  for (const CpuKernels* k : runnable_builds()) {
    for (const GeneratorParams& g : gens) {
      for (uint64_t first : kFirsts) {
        for (uint64_t stride : {1, 2, 3, 1000}) {
          INFO(k->isa << " kind " << int(g.kind) << " first " << first << " stride " << stride);
          const auto v = generated(*k, g, first, stride, 37);
          for (uint64_t i = 0; i < v.size(); ++i)
            REQUIRE(same_bits(v[i], element_value(g, first + i * stride)));
          const auto f = generated(*k, g, first, stride, 11, /*to_float=*/true);
          for (uint64_t i = 0; i < f.size(); ++i)
            REQUIRE(same_bits(f[i], double(float(element_value(g, first + i * stride)))));
        }
      }
    }
  }
}

TEST_CASE("every CPU build gives the scalar reference's normal bits on millions of (seed, index) pairs", "[kernels]") {
  // 2^20 elements from each of four (seed, first index) places, float64 and float32, and every
  // other one of them (stride 2): the reference once, every build against it (some 7000 slow
  // paths a place, ~260 of them tails; the slow path runs in lanes, kW queued elements at a time).
  const auto builds = runnable_builds();
  const uint64_t n = uint64_t{1} << 20;
  const std::pair<uint64_t, uint64_t> places[] = {
      {42, 0}, {3, (uint64_t{1} << 32) - 1000}, {0xfeedface12345678u, uint64_t{1} << 45}, {~uint64_t{0}, 12344}};
  for (const auto& [seed, first] : places) {
    const GeneratorParams g{Generator::kNormal, 10.0, 2.0, seed};
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; ++i) want[i] = element_value(g, first + i);
    for (const CpuKernels* k : builds) {
      INFO(k->isa << " seed " << seed << " first " << first);
      const auto v = generated(*k, g, first, 1, n);
      const auto f = generated(*k, g, first, 1, n, /*to_float=*/true);
      const auto s = generated(*k, g, first, 2, n / 2);  // the fused path's selected columns
      uint64_t differ = 0, differ_f32 = 0, differ_strided = 0;
      for (uint64_t i = 0; i < n; ++i) {
        differ += !same_bits(v[i], want[i]);
        differ_f32 += !same_bits(f[i], double(float(want[i])));
      }
      for (uint64_t i = 0; i < n / 2; ++i) differ_strided += !same_bits(s[i], want[2 * i]);
      CHECK(differ == 0);
      CHECK(differ_f32 == 0);
      CHECK(differ_strided == 0);
    }
  }
}

TEST_CASE("every CPU build gives the scalar reference's ziggurat at the edge words", "[kernels]") {
  const test::NormalWords edge = test::edge_normal_words();
  for (const CpuKernels* k : runnable_builds()) {
    std::vector<double> got(edge.words.size());
    k->ziggurat(5, edge.index.data(), edge.words.data(), edge.words.size(), got.data());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(k->isa << " word " << std::hex << edge.words[i] << " index " << std::dec << edge.index[i]);
      REQUIRE(same_bits(got[i], ziggurat(5, edge.index[i], edge.words[i])));
    }
  }
}

namespace {

// The scalar reference: every element into one ExactSum, min and max as the kernels take them.
// With `squares`, each v's square too, split exactly as the kernels split it (overflowed: v*v only).
PartialSum reference_total(const std::vector<double>& x, uint64_t step, uint64_t n, double scale,
                           double offset, bool squares = false) {
  PartialSum p;
  p.has_squares = squares;
  for (uint64_t j = 0; j < n; ++j) {
    const double v = x[j * step] * scale + offset;
    p.exact.add(v);
    if (squares) {
      const double h = v * v;
      p.squares.add(h);
      if (std::isfinite(h)) p.squares.add(std::fma(v, v, -h));
    }
    p.min = v < p.min ? v : p.min;
    p.max = v > p.max ? v : p.max;
  }
  p.exact.normalize();
  p.sum = p.exact.rounded();
  p.squares.normalize();
  return p;
}

// Smooth data (no spills), data over the whole exponent range (lo's own error spills), data
// with NaN, infinities and huge values, data whose lane sums overflow (they spill), zeros of
// both signs (a job of scale 1 and offset +0.0 takes the elements as loaded, and its min and max
// must still be x + 0.0's: +0.0), and tiny values.
std::vector<std::vector<double>> reduce_test_data() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> data(7, std::vector<double>(1200));
  for (size_t i = 0; i < 1200; ++i) {
    // Tiny values with whole mantissas, whose squares are subnormal (h rounded, l the fma's
    // rounding of the rest): the plain adds' bounds must hold at the bottom of the range too.
    data[6][i] = std::ldexp(1.0 + std::fabs(std::sin(double(i))), -530 - int(i % 5));
    data[0][i] = std::sin(double(i)) * 1e3;
    data[1][i] = std::ldexp(std::sin(double(i)), int(i % 200) * 10 - 1000);
    data[2][i] = i % 97 == 3 ? std::nan("") : i % 89 == 1 ? inf : i % 83 == 2 ? -inf
               : i % 7 == 0 ? 1e300 : std::cos(double(i));
    // Values that overflow a lane's hi on the way (2 x 0.6e308 - 1 twice is past DBL_MAX).
    data[3][i] = i % 3 == 0 ? 0.6e308 : i % 3 == 1 ? -0.2e308 : 1e-300 * std::sin(double(i));
    data[4][i] = i % 2 == 1 ? -0.0 : i % 4 == 0 ? 0.0 : std::fabs(std::sin(double(i)));
    data[5][i] = -0.0;
  }
  return data;
}

}  // namespace

// (scale, offset): a general one, the identity the kernels take elements as loaded for, and one
// that only looks like it (offset -0.0 keeps -0.0).
const std::pair<double, double> kTransforms[] = {{2.0, -1.0}, {1.0, 0.0}, {1.0, -0.0}};

TEST_CASE("CPU kernels reduce a strided run exactly, the same bits on every build", "[kernels]") {
  const std::vector<std::vector<double>> data = reduce_test_data();
  for (const auto& [scale, offset] : kTransforms) {
    for (size_t d = 0; d < data.size(); ++d) {
      for (uint64_t step : {1, 2, 7}) {
        // 600 and 140: runs of 300 and 70, long enough for the plain lo additions to be tried and
        // too short (reduce_impl.h, kOptimisticLeast).
        for (uint64_t n : {0, 5, 8, 13, 100, 140, 600}) {
          if (n > 0 && (n - 1) * step >= data[d].size()) continue;
          const PartialSum want = reference_total(data[d], step, n, scale, offset);
          for (const CpuKernels* k : runnable_builds()) {
            INFO(k->isa << " data " << d << " step " << step << " n " << n << " scale " << scale << " offset "
                        << offset << (std::signbit(offset) ? " (-0.0)" : ""));
            ReduceLanes lanes;
            lanes_init(lanes);
            // In two calls, as rows of a chunk arrive.
            k->reduce(data[d].data(), step, n / 2, scale, offset, lanes);
            k->reduce(data[d].data() + n / 2 * step, step, n - n / 2, scale, offset, lanes);
            PartialSum got;
            lanes_total(lanes, got);
            CHECK(same_bits(got, want));
          }
        }
      }
    }
  }
}

TEST_CASE("reduce_squares adds each square split exactly in the same pass, the same bits on every build",
          "[kernels]") {
  std::vector<std::vector<double>> data = reduce_test_data();
  // Squares over the whole range that stays exact (|v| from 2^-480 to 2^500) and near overflow.
  std::vector<double> wide(1000);
  for (size_t i = 0; i < wide.size(); ++i)
    wide[i] = std::ldexp(std::sin(double(i) + 0.5), int(i % 98) * 10 - 480) * (i % 13 == 0 ? 0x1p10 : 1.0);
  data.push_back(wide);
  for (const auto& [scale, offset] : kTransforms) {
    for (size_t d = 0; d < data.size(); ++d) {
      for (uint64_t step : {1, 2, 7}) {
        for (uint64_t n : {0, 5, 8, 13, 100, 140, 600}) {  // as in the test above
          if (n > 0 && (n - 1) * step >= data[d].size()) continue;
          const PartialSum want = reference_total(data[d], step, n, scale, offset, /*squares=*/true);
          for (const CpuKernels* k : runnable_builds()) {
            INFO(k->isa << " data " << d << " step " << step << " n " << n << " scale " << scale << " offset "
                        << offset << (std::signbit(offset) ? " (-0.0)" : ""));
            ReduceLanes lanes;
            SquareLanes squares;
            lanes_init(lanes);
            lanes_init(squares.high);
            lanes_init(squares.low);
            k->reduce_squares(data[d].data(), step, n / 2, scale, offset, lanes, squares);
            k->reduce_squares(data[d].data() + n / 2 * step, step, n - n / 2, scale, offset, lanes, squares);
            PartialSum got;
            lanes_total(lanes, got);
            lanes_squares_total(squares, got);
            CHECK(same_bits(got, want));
          }
        }
      }
    }
  }
}

TEST_CASE("the lanes stay exact where a plain double sum loses everything", "[kernels]") {
  // 1e300, then 1000 ones, then -1e300: a float64 sum gives 0 (or 1e300 - 1e300); the exact one 1000.
  std::vector<double> x(1002, 1.0);
  x[0] = 1e300;
  x[1001] = -1e300;
  for (const CpuKernels* k : runnable_builds()) {
    INFO(k->isa);
    ReduceLanes lanes;
    lanes_init(lanes);
    k->reduce(x.data(), 1, x.size(), 1.0, 0.0, lanes);
    PartialSum got;
    lanes_total(lanes, got);
    CHECK(got.sum == 1000.0);
  }
}

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

// n elements of normal(10, 1).
std::vector<double> normal_data(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(10.0, 1.0);
  std::vector<double> out(n);
  for (double& v : out) v = normal(rng);
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

TEST_CASE("a long run is proven in blocks: one of 2^20 normal(0, 1) elements would fail as a whole",
          "[kernels]") {
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

TEST_CASE("random runs over random windows of magnitude: plain or exact, the reference's bits", "[kernels]") {
  // Each case: a few runs of random lengths whose elements are U(1, 2) x 2^e with e drawn from a
  // window of random place and width (0 to 120 binades, anywhere from the subnormals to near
  // overflow), random signs or one sign, some zeros, every element or every other, through one of
  // the transforms; summed, and with their squares, on every build, against the scalar reference. Windows narrow enough for the plain adds' proofs and
  // wide enough to fail them both come up (counted).
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
    const PartialSum want_squares = reference_total(all, step, all.size() / step, scale, offset, /*squares=*/true);
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

TEST_CASE("a huge element among ordinary ones costs its lane a spill or two, not one per later element",
          "[kernels]") {
  // normal(10, 1) with 20 elements of netCDF's fill value: a lane that kept 9.97e36 beside its
  // ordinary sum would spill nearly every later element of the lane (thousands here); emptied after
  // a spill, it spills a few times per fill value. The sum stays exact either way.
  std::vector<double> x = normal_data(100000, 44);
  const int fills = 20;
  for (int f = 0; f < fills; ++f) x[size_t(f) * 4999 + 17] = 9.96921e36;
  const PartialSum want = reference_total(x, 1, x.size(), 1.0, 0.0);
  for (const CpuKernels* k : runnable_builds()) {
    INFO(k->isa);
    ReduceLanes lanes;
    lanes_init(lanes);
    k->reduce(x.data(), 1, x.size(), 1.0, 0.0, lanes);
    CHECK(lanes.spills <= uint64_t(10 * fills));
    PartialSum got;
    lanes_total(lanes, got);
    CHECK(same_bits(got, want));
  }
}

TEST_CASE("streaming stores give the same bits at any alignment and length", "[kernels]") {
  const GeneratorParams gens[] = {{Generator::kNormal, 10.0, 1.0, 42}, {Generator::kUniform, -2.0, 3.0, 7}, {Generator::kArange, 5.0, 3.0, 0}, {Generator::kConstant, 2.5, 0.0, 0}};
  for (const CpuKernels* k : runnable_builds()) {
    for (const GeneratorParams& g : gens) {
      for (const uint64_t n : {uint64_t{1}, uint64_t{15}, uint64_t{64}, uint64_t{1001}}) {
        for (const size_t misalign : {size_t{0}, size_t{1}, size_t{3}}) {  // in doubles: 0, 8, 24 bytes
          INFO(k->isa << " generator " << int(g.kind) << " n " << n << " offset " << misalign);
          const std::vector<double> plain = generated(*k, g, 6, 1, n);
          // 64-byte aligned storage, written from `misalign` doubles in.
          std::vector<double> storage(n + 16, -1.0);
          double* base = storage.data();
          while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
          double* out = base + misalign;
          k->generate(g, false, 6, 1, n, out, /*streaming=*/true);
          streaming_fence();
          for (uint64_t i = 0; i < n; ++i) REQUIRE(same_bits(out[i], plain[i]));
          CHECK(out[n] == -1.0);  // nothing written past the end
        }
      }
    }
  }
}
