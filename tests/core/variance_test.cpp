// exact_variance and exact_std (core/variance.h): the variance correctly rounded and the standard
// deviation the correctly rounded root of the exact variance, checked against exact rationals:
// A / B with both below 2^53 is correctly rounded by one IEEE division, and a root s is correctly
// rounded when the exact variance lies strictly between the squares of its half-ulp neighbours.
#include <catch2/catch.hpp>

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "core/variance.h"

using boost::multiprecision::cpp_int;

namespace {

struct Sums {
  psched::ExactSum sum, squares;
  uint64_t n = 0;
};

// Each square split exactly, as the workers split it.
Sums sums_of(const std::vector<double>& xs) {
  Sums s;
  for (double x : xs) {
    s.sum.add(x);
    const double h = x * x;
    s.squares.add(h);
    if (std::isfinite(h)) s.squares.add(std::fma(x, x, -h));
    ++s.n;
  }
  return s;
}

uint64_t bits(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// s is sqrt(A / B) correctly rounded (s > 0 normal): (s - u/2)^2 < A/B < (s + u/2)^2, u = ulp(s).
bool is_rounded_root(double s, const cpp_int& a, const cpp_int& b) {
  int e = 0;
  const double m = std::frexp(s, &e);                   // s = m 2^e, m in [0.5, 1)
  const cpp_int mant = cpp_int(int64_t(std::ldexp(m, 53)));  // s = mant 2^(e - 53)
  // Neighbours' midpoints (2 mant -+ 1) 2^(e - 54); squared: (2 mant -+ 1)^2 2^(2e - 108).
  const int scale = 2 * e - 108;
  const auto square_vs = [&](const cpp_int& mid) {  // sign of mid^2 2^scale - A/B
    cpp_int lhs = mid * mid * b, rhs = a;
    if (scale >= 0) lhs <<= scale; else rhs <<= -scale;
    return lhs < rhs ? -1 : lhs > rhs ? 1 : 0;
  };
  return square_vs(2 * mant - 1) < 0 && square_vs(2 * mant + 1) > 0;
}

// arange(start, start + n step, step) as doubles (all exact integers).
std::vector<double> arange(int64_t start, int64_t step, int64_t n) {
  std::vector<double> xs;
  for (int64_t i = 0; i < n; ++i) xs.push_back(double(start + i * step));
  return xs;
}

}  // namespace

TEST_CASE("round_scaled rounds to nearest with ties to even, subnormals included", "[variance]") {
  CHECK(psched::round_scaled(3, 0, false) == 3.0);
  CHECK(psched::round_scaled((uint64_t{1} << 54) + 2, -54, false) == 1.0);  // tie: to even (down)
  CHECK(psched::round_scaled((uint64_t{1} << 54) + 6, -54, false) == 1.0 + 0x1p-51);  // tie: to even (up)
  CHECK(psched::round_scaled((uint64_t{1} << 54) + 2, -54, true) == 1.0 + 0x1p-52);   // past the tie
  CHECK(psched::round_scaled(uint64_t{3} << 60, -1135, false) == 0x1p-1074 * 2);      // 1.5 x 2^-1074: tie, even
  CHECK(psched::round_scaled(uint64_t{1} << 60, -1136, false) == 0.0);              // 2^-1076: half of 2^-1075 lower
  CHECK(psched::round_scaled(uint64_t{1} << 60, -1135, true) == 0x1p-1074);         // just past half of the least
  CHECK(std::isinf(psched::round_scaled(uint64_t{1} << 63, 962, false)));           // 2^1025
}

TEST_CASE("var and std of small integer sets are the correctly rounded rationals", "[variance]") {
  const Sums s = sums_of({1, 2, 3, 4});
  CHECK(psched::exact_variance(s.sum, s.squares, s.n, 0) == 1.25);
  CHECK(bits(psched::exact_std(s.sum, s.squares, s.n, 0)) == bits(std::sqrt(1.25)));  // var exact: sqrt rounds
  CHECK(bits(psched::exact_variance(s.sum, s.squares, s.n, 1)) == bits(5.0 / 3.0));
  CHECK(is_rounded_root(psched::exact_std(s.sum, s.squares, s.n, 1), 5, 3));
}

TEST_CASE("var and std of arange match the closed form step^2 (n^2 - 1) / 12, with a huge mean too",
          "[variance]") {
  for (int64_t start : {int64_t{0}, int64_t{-7}, int64_t{1} << 40, (int64_t{1} << 52) - 1000000}) {
    for (int64_t step : {1, 3}) {
      for (int64_t n : {2, 3, 10, 1001, 65537}) {
        const Sums s = sums_of(arange(start, step, n));
        for (uint32_t ddof : {0u, 1u}) {
          INFO("start " << start << " step " << step << " n " << n << " ddof " << ddof);
          // var = step^2 n (n^2 - 1) / (12 (n - ddof)): the ratio in lowest terms is exact in doubles.
          // At most 9 x 65537 x (65537^2 - 1), ~2.5e15: int64 holds it.
          const int64_t a = step * step * n * (n * n - 1), b = 12 * (n - int64_t(ddof));
          const int64_t g = std::gcd(a, b), ra = a / g, rb = b / g;
          REQUIRE(ra < (int64_t{1} << 53));
          const double want = double(ra) / double(rb);
          CHECK(bits(psched::exact_variance(s.sum, s.squares, s.n, ddof)) == bits(want));
          CHECK(is_rounded_root(psched::exact_std(s.sum, s.squares, s.n, ddof), ra, rb));
        }
      }
    }
  }
}

TEST_CASE("var and std of a constant are zero, and fractions keep full precision", "[variance]") {
  const Sums c = sums_of(std::vector<double>(1000, 11.3));
  CHECK(bits(psched::exact_variance(c.sum, c.squares, c.n, 0)) == bits(0.0));
  CHECK(bits(psched::exact_std(c.sum, c.squares, c.n, 1)) == bits(0.0));
  // {0.1, 0.2}: the exact var is d^2 / 4, d = 0.2 - 0.1 (exact, Sterbenz) = md 2^-56, so md^2 2^-114;
  // v = mv 2^(e - 53) must be within half an ulp, 2^(e - 54), of it (all times 2^115 below).
  const Sums f = sums_of({0.1, 0.2});
  const cpp_int md = cpp_int(int64_t(std::ldexp(0.2 - 0.1, 56)));
  const double v = psched::exact_variance(f.sum, f.squares, f.n, 0);
  int e = 0;
  std::frexp(v, &e);
  REQUIRE(e + 61 > 0);
  const cpp_int scaled = cpp_int(int64_t(std::ldexp(v, 53 - e))) << (e + 62), exact = md * md * 2;
  CHECK((scaled > exact ? scaled - exact : exact - scaled) < (cpp_int(1) << (e + 61)));
}

TEST_CASE("var and std are NaN as numpy's for too few elements, NaN and infinities, and inf for an overflowing square",
          "[variance]") {
  const Sums one = sums_of({5});
  CHECK(psched::exact_variance(one.sum, one.squares, one.n, 0) == 0.0);
  CHECK(std::isnan(psched::exact_variance(one.sum, one.squares, one.n, 1)));
  CHECK(std::isnan(psched::exact_std(one.sum, one.squares, one.n, 1)));
  const Sums none = sums_of({});
  CHECK(std::isnan(psched::exact_variance(none.sum, none.squares, none.n, 0)));
  const Sums nan = sums_of({1, std::numeric_limits<double>::quiet_NaN(), 3});
  CHECK(std::isnan(psched::exact_variance(nan.sum, nan.squares, nan.n, 0)));
  CHECK(std::isnan(psched::exact_std(nan.sum, nan.squares, nan.n, 0)));
  const Sums inf = sums_of({1, std::numeric_limits<double>::infinity()});
  CHECK(std::isnan(psched::exact_variance(inf.sum, inf.squares, inf.n, 0)));
  const Sums big = sums_of({1e200, -1e200});
  CHECK(psched::exact_variance(big.sum, big.squares, big.n, 0) == std::numeric_limits<double>::infinity());
  CHECK(psched::exact_std(big.sum, big.squares, big.n, 0) == std::numeric_limits<double>::infinity());
  // Near the overflow limit but squares finite: var of {-2^511, 2^511} is exactly 2^1022.
  const Sums edge = sums_of({-0x1p511, 0x1p511});
  CHECK(psched::exact_variance(edge.sum, edge.squares, edge.n, 0) == 0x1p1022);
  CHECK(psched::exact_std(edge.sum, edge.squares, edge.n, 0) == 0x1p511);
}
