#include <catch2/catch.hpp>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/exact_sum.h"
#include "core/partial.h"

using namespace psched;

namespace {

uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

double exact_sum(const std::vector<double>& xs) {
  ExactSum s;
  for (double x : xs) s.add(x);
  return s.rounded();
}

// The slow reference: integers k_i (|k_i| < 2^40) times 2^(e_i) with every e_i in [e_min, e_min + 60]
// add up exactly as one __int128 at scale 2^e_min (< 2^127 for up to 2^20 terms); libgcc converts
// it to double correctly rounded to nearest-even, and ldexp scales it exactly while it stays normal.
struct ScaledIntegers {
  std::vector<double> values;
  __int128 total = 0;  // in units of 2^e_min
  int e_min = 0;
  double reference() const { return std::ldexp(double(total), e_min); }
};

ScaledIntegers scaled_integers(std::mt19937_64& rng, int e_min, size_t n) {
  ScaledIntegers s;
  s.e_min = e_min;
  std::uniform_int_distribution<int64_t> k(-(int64_t{1} << 40), int64_t{1} << 40);
  std::uniform_int_distribution<int> shift(0, 60);
  for (size_t i = 0; i < n; ++i) {
    const int64_t ki = k(rng);
    const int e = shift(rng);
    s.values.push_back(std::ldexp(double(ki), e_min + e));
    s.total += __int128(ki) << e;
  }
  return s;
}

}  // namespace

TEST_CASE("the exact sum of scaled integers is the correctly rounded reference", "[exact_sum]") {
  std::mt19937_64 rng(16);
  for (int e_min : {-1000, -600, -80, -30, 0, 40, 500, 900}) {
    for (size_t n : {1, 2, 3, 10, 1000, 100000}) {
      const ScaledIntegers s = scaled_integers(rng, e_min, n);
      INFO("e_min " << e_min << ", n " << n);
      CHECK(bits_of(exact_sum(s.values)) == bits_of(s.reference()));
    }
  }
}

TEST_CASE("ties round to even and carries ripple through the digits", "[exact_sum]") {
  const double two53 = 9007199254740992.0;
  CHECK(exact_sum({two53, 1.0}) == two53);              // tie: down to the even mantissa
  CHECK(exact_sum({two53, 3.0}) == two53 + 4.0);        // tie: up to the even mantissa
  CHECK(exact_sum({two53, 1.0, 0x1p-1074}) == two53 + 2.0);  // just past the tie: up
  CHECK(exact_sum({two53, -1.0}) == two53 - 1.0);
  // A borrow through every digit from 2^0 down to 2^-1074, and back.
  ExactSum s;
  s.add(1.0);
  s.add(-0x1p-1074);
  CHECK(s.rounded() == 1.0);
  CHECK(s.terms() == std::vector<double>{1.0, -0x1p-1074});
  s.add(0x1p-1074);
  CHECK(s.terms() == std::vector<double>{1.0});
  // Negative totals: -(2^53 + 1) ties to -2^53.
  CHECK(exact_sum({-two53, -1.0}) == -two53);
}

TEST_CASE("catastrophic cancellation keeps the small terms", "[exact_sum]") {
  CHECK(exact_sum({1e300, 1.0, -1e300}) == 1.0);
  CHECK(exact_sum({1e308, 1e-308, -1e308}) == 1e-308);
  CHECK(exact_sum({0x1p-1074, 1e308, -1e308}) == 0x1p-1074);
  CHECK(exact_sum({1.0, 1e100, 1.0, -1e100}) == 2.0);
}

TEST_CASE("subnormals add exactly and round into the normal range", "[exact_sum]") {
  const double tiny = std::numeric_limits<double>::denorm_min();
  CHECK(exact_sum({tiny, tiny, tiny}) == 3 * tiny);
  // 2^52 of the smallest subnormal: the smallest normal.
  ExactSum s;
  for (int i = 0; i < 4096; ++i) s.add(std::ldexp(1.0, -1074 + 40));
  CHECK(s.rounded() == DBL_MIN);
  CHECK(exact_sum({DBL_MIN, -tiny}) == DBL_MIN - tiny);  // the largest subnormal
  CHECK(exact_sum({-tiny, -tiny}) == -2 * tiny);
}

TEST_CASE("overflow: past DBL_MAX rounds to infinity, and coming back is exact", "[exact_sum]") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(exact_sum({DBL_MAX, DBL_MAX, -DBL_MAX}) == DBL_MAX);
  CHECK(exact_sum({DBL_MAX, DBL_MAX}) == inf);
  CHECK(exact_sum({-DBL_MAX, -DBL_MAX}) == -inf);
  // DBL_MAX + half its ulp (2^970) is a tie; DBL_MAX's mantissa is odd, so it rounds up: inf.
  CHECK(exact_sum({DBL_MAX, 0x1p970}) == inf);
  CHECK(exact_sum({DBL_MAX, 0x1p969}) == DBL_MAX);
  CHECK(exact_sum({DBL_MAX, 0x1p970, -0x1p-1074}) == DBL_MAX);
}

TEST_CASE("NaN and infinities: NaN wins, opposite infinities give NaN", "[exact_sum]") {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(exact_sum({1.0, inf, 2.0}) == inf);
  CHECK(exact_sum({1.0, -inf, 1e308}) == -inf);
  CHECK(std::isnan(exact_sum({1.0, inf, -inf})));
  CHECK(std::isnan(exact_sum({1.0, nan, 2.0})));
  CHECK(std::isnan(exact_sum({inf, nan})));
  ExactSum s;
  for (double x : {1.0, nan, inf, -inf, inf, 2.0}) s.add(x);
  CHECK(s.nan == 1);
  CHECK(s.pos_inf == 2);
  CHECK(s.neg_inf == 1);
  // The finite part is kept apart: 3.
  ExactSum finite = s;
  finite.nan = finite.pos_inf = finite.neg_inf = 0;
  CHECK(finite.rounded() == 3.0);
}

TEST_CASE("zero is +0 whatever the signs of the zeros added", "[exact_sum]") {
  CHECK(bits_of(exact_sum({})) == bits_of(0.0));
  CHECK(bits_of(exact_sum({-0.0, -0.0})) == bits_of(0.0));
  CHECK(bits_of(exact_sum({1.5, -1.5})) == bits_of(0.0));
}

TEST_CASE("any order and any grouping give the same digits and bits", "[exact_sum]") {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> e(-1070, 1000);
  std::uniform_real_distribution<double> m(-1.0, 1.0);
  std::vector<double> xs;
  for (int i = 0; i < 5000; ++i) xs.push_back(std::ldexp(m(rng), e(rng)));
  for (int i = 0; i < 5000; ++i) xs.push_back(m(rng) * 1e-300);
  ExactSum first;
  for (double x : xs) first.add(x);
  for (int trial = 0; trial < 20; ++trial) {
    std::shuffle(xs.begin(), xs.end(), rng);
    // Cut into random groups, each its own accumulator, then merged.
    ExactSum total;
    size_t i = 0;
    while (i < xs.size()) {
      const size_t n = std::min(xs.size() - i, size_t(rng() % 700 + 1));
      ExactSum group;
      for (size_t j = 0; j < n; ++j) group.add(xs[i + j]);
      if (trial % 2) group.normalize();
      total.add(group);
      i += n;
    }
    CHECK(same_value(total, first));
    CHECK(bits_of(total.rounded()) == bits_of(first.rounded()));
  }
}

TEST_CASE("terms are few, non-overlapping, and rebuild the exact value", "[exact_sum]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(11.0, 1.0);
  ExactSum s;
  for (int i = 0; i < 100000; ++i) s.add(normal(rng));
  const std::vector<double> t = s.terms();
  CHECK(t.size() >= 1);
  CHECK(t.size() <= 3);  // ~1e6 down to 2^-50: about 70 bits
  CHECK(t[0] == s.rounded());
  for (size_t i = 1; i < t.size(); ++i) CHECK(std::fabs(t[i]) <= std::ldexp(std::fabs(t[i - 1]), -53));
  ExactSum back;
  back.add_terms(t.data(), t.size());
  CHECK(same_value(back, s));

  CHECK(ExactSum{}.terms().empty());
  ExactSum wide;
  for (double x : {1e300, 1.0, 1e-300, 0x1p-1074}) wide.add(x);
  const std::vector<double> w = wide.terms();
  CHECK(w == std::vector<double>{1e300, 1.0, 1e-300, 0x1p-1074});
}

TEST_CASE("same_bits compares every field of a partial, the exact sum after normalisation",
          "[partial]") {
  PartialSum a;
  a.exact.add(1.0);
  a.exact.add(0x1p-60);
  a.sum = a.exact.rounded();
  a.count = 2;
  a.min = 0x1p-60;
  a.max = 1.0;
  PartialSum b = a;
  b.exact.normalize();
  CHECK(same_bits(a, b));
  b.exact.add(0x1p-1074);
  CHECK_FALSE(same_bits(a, b));  // the rounded sums agree, the exact ones do not
  b = a;
  b.min = -0.0;
  a.min = 0.0;
  CHECK_FALSE(same_bits(a, b));
}

TEST_CASE("partials merge exactly whatever the order", "[partial]") {
  std::vector<PartialSum> p(5);
  const double values[5] = {1e16, 1.0, -1e16, 1.0, 3.0};
  for (int i = 0; i < 5; ++i) {
    p[size_t(i)].exact.add(values[i]);
    p[size_t(i)].sum = values[i];
    p[size_t(i)].count = 1;
    p[size_t(i)].min = p[size_t(i)].max = values[i];
  }
  const auto merged = [](const std::vector<PartialSum>& partials) {
    PartialSum total;
    for (const PartialSum& q : partials) merge(total, q);
    return total;
  };
  const PartialSum r = merged(p);
  std::reverse(p.begin(), p.end());
  CHECK(same_bits(r, merged(p)));
  CHECK(r.sum == 5.0);
  CHECK(r.count == 5);
  CHECK(r.min == -1e16);
  CHECK(r.max == 1e16);
}

TEST_CASE("the fast path of rounded() and terms() gives the general path's bits", "[exact_sum]") {
  std::mt19937_64 rng(1675);
  std::uniform_real_distribution<double> value(0.0, 20.0);
  std::uniform_int_distribution<int> scale(-1100, 1000), count(1, 64), kind(0, 5);
  size_t checked = 0;
  for (int i = 0; i < 20000; ++i) {
    ExactSum s;
    const int n = count(rng), k = kind(rng), e = scale(rng);
    for (int j = 0; j < n; ++j) {
      double v = value(rng);
      if (k == 1) v = std::ldexp(v, e);                       // anywhere in the range
      if (k == 2) v = j % 2 ? -v : v;                         // cancellation, negative sums
      if (k == 3) v = std::ldexp(std::floor(v * 1e6), -20);   // few bits: narrow sums
      if (k == 4) v = std::ldexp(v, j % 2 ? 60 : -60);        // wide sums
      if (k == 5) v = std::ldexp(1.0, 63) * 2 - std::ldexp(1.0, 10) * j;  // near 2^64
      s.add(v);
    }
    const std::vector<double> fast = s.terms(), general = exact_sum_detail::general_terms(s);
    REQUIRE(fast.size() == general.size());
    for (size_t t = 0; t < fast.size(); ++t) CHECK(bits_of(fast[t]) == bits_of(general[t]));
    CHECK(bits_of(s.rounded()) == bits_of(exact_sum_detail::general_rounded(s)));
    ExactSum normalized = s;
    normalized.normalize();
    CHECK(bits_of(normalized.rounded_normalized()) == bits_of(exact_sum_detail::general_rounded(s)));
    // The worker's compact form: the same terms, the sum rounded once, the value rebuilt.
    const ExactTerms compact(s);
    REQUIRE(compact.size() == general.size());
    for (size_t t = 0; t < general.size(); ++t) CHECK(bits_of(compact.data()[t]) == bits_of(general[t]));
    CHECK(bits_of(compact.rounded()) == bits_of(exact_sum_detail::general_rounded(s)));
    CHECK(same_value(compact.value(), s));
    checked += fast.size();
  }
  CHECK(checked > 20000);
}

TEST_CASE("ExactTerms keeps the specials and rounds as the accumulator does", "[exact_sum]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::vector<double>& values :
       {std::vector<double>{}, {1.0, std::nan("")}, {inf, 2.0}, {-inf, 2.0}, {inf, -inf},
        {std::ldexp(1.0, 900), std::ldexp(1.0, -900), -3.0}}) {
    ExactSum s;
    for (double v : values) s.add(v);
    const ExactTerms t(s);
    CHECK(bits_of(t.rounded()) == bits_of(s.rounded()));
    CHECK(t.nan == s.nan);
    CHECK(t.pos_inf == s.pos_inf);
    CHECK(t.neg_inf == s.neg_inf);
    CHECK(same_value(t.value(), s));
  }
}

TEST_CASE("normalize() carries as the plain digit-by-digit loop does", "[exact_sum]") {
  // The reference: every digit from the lowest, whatever the digits hold.
  const auto reference = [](ExactSum s) {
    for (int i = 0; i + 1 < kExactDigits; ++i) {
      const int64_t carry = s.digit[i] >> kExactDigitBits;
      s.digit[i] -= carry * (int64_t{1} << kExactDigitBits);
      s.digit[i + 1] += carry;
    }
    return s;
  };
  std::mt19937_64 rng(2311);
  std::uniform_int_distribution<int> where(0, kExactDigits - 1), how_many(0, 6);
  std::uniform_int_distribution<int64_t> amount(-(int64_t{1} << 60), int64_t{1} << 60);
  for (int i = 0; i < 20000; ++i) {
    ExactSum s;
    const int n = how_many(rng);
    for (int j = 0; j < n; ++j) s.digit[where(rng)] += j % 3 == 2 ? amount(rng) % 7 : amount(rng);
    ExactSum fast = s;
    fast.normalize();
    const ExactSum want = reference(s);
    REQUIRE(std::memcmp(fast.digit, want.digit, sizeof want.digit) == 0);
  }
}
