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
#include "tests/worker/kernels_reference.h"
#include "worker/cpu/kernels.h"

using namespace psched;
using namespace psched::test;

namespace {

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

// Smooth data (no spills), data over the whole exponent range (lo's own error spills), data
// with NaN, infinities and huge values, data whose lane sums overflow (they spill), zeros of
// both signs (a job of scale 1 and offset +0.0 takes the elements as loaded, and its min and max
// must still be x + 0.0's: +0.0), and tiny values.
std::vector<std::vector<double>> reduce_test_data() {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> data(7, std::vector<double>(1200));
  for (size_t i = 0; i < 1200; ++i) {
    data[0][i] = std::sin(double(i)) * 1e3;
    data[1][i] = std::ldexp(std::sin(double(i)), int(i % 200) * 10 - 1000);
    data[2][i] = i % 97 == 3 ? std::nan("") : i % 89 == 1 ? inf : i % 83 == 2 ? -inf
               : i % 7 == 0 ? 1e300 : std::cos(double(i));
    // Values that overflow a lane's hi on the way (2 x 0.6e308 - 1 twice is past DBL_MAX).
    data[3][i] = i % 3 == 0 ? 0.6e308 : i % 3 == 1 ? -0.2e308 : 1e-300 * std::sin(double(i));
    data[4][i] = i % 2 == 1 ? -0.0 : i % 4 == 0 ? 0.0 : std::fabs(std::sin(double(i)));
    data[5][i] = -0.0;
    // Tiny values with whole mantissas, whose squares are subnormal (h rounded, l the fma's
    // rounding of the rest): the plain adds' bounds must hold at the bottom of the range too.
    data[6][i] = std::ldexp(1.0 + std::fabs(std::sin(double(i))), -530 - int(i % 5));
  }
  return data;
}

}  // namespace

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
