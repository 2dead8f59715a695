#include "core/variance.h"

#include <boost/multiprecision/cpp_int.hpp>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace psched {

namespace {

using boost::multiprecision::cpp_int;

// value = integer(s) * 2^kExactLowestBit, s's finite part.
cpp_int integer_of(ExactSum s) {
  s.normalize();
  cpp_int v = 0;
  for (int i = kExactDigits - 1; i >= 0; --i) {
    v <<= kExactDigitBits;
    v += s.digit[i];
  }
  return v;
}

int bits_of(const cpp_int& v) { return v == 0 ? 0 : int(boost::multiprecision::msb(v)) + 1; }

// v 2^e (v > 0) plus a sticky tail, as round_scaled wants it: v cut to 64 bits, what was cut ORed in.
double round_big(cpp_int v, int e, bool sticky) {
  const int extra = bits_of(v) - 64;
  if (extra > 0) {
    sticky = sticky || boost::multiprecision::lsb(v) < unsigned(extra);  // a cut bit is set
    v >>= extra;
    e += extra;
  }
  return round_scaled(static_cast<uint64_t>(v), e, sticky);
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool has_special(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof) {
  return n <= ddof || sum.nan || sum.pos_inf || sum.neg_inf || squares.nan || squares.pos_inf || squares.neg_inf;
}

// The variance when has_special(): NaN, or +inf when only a square overflowed.
double special_variance(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof) {
  if (n <= ddof || sum.nan || sum.pos_inf || sum.neg_inf || squares.nan || squares.neg_inf) return kNaN;
  return std::numeric_limits<double>::infinity();
}

// n (n S2 - S1^2) scaled: value = N 2^(2 kExactLowestBit) / D, D = n (n - ddof). N >= 0 (a
// square below 2^-969 rounded could leave it a hair under: then 0).
void numerator_denominator(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof,
                           cpp_int& num, cpp_int& den) {
  const cpp_int s1 = integer_of(sum), s2 = integer_of(squares);
  num = cpp_int(n) * (s2 << -kExactLowestBit) - s1 * s1;
  if (num < 0) num = 0;
  den = cpp_int(n) * cpp_int(n - ddof);
}

}  // namespace

double round_scaled(uint64_t m, int e, bool sticky) {
  if (m == 0) return 0.0;  // a tail alone (below 2^e) never reaches half of 2^-1074 here
  const int length = 64 - __builtin_clzll(m);
  // The lowest bit the result keeps: 53 bits below the leading one, or 2^-1074 for a subnormal.
  const int lowest = std::max(e + length - 53, -1074);
  if (lowest <= e) {
    PSCHED_ASSERT(!sticky, "round_scaled: {} bits with a sticky tail cannot round it", length);
    return std::ldexp(double(m), e);  // exact: m fits 53 bits at this scale
  }
  const int shift = lowest - e;
  uint64_t q = shift >= 64 ? 0 : m >> shift;
  const uint64_t rest = shift >= 64 ? m : m & ((uint64_t{1} << shift) - 1);
  const bool above_half = shift > 64 ? false : shift == 64 ? rest > (uint64_t{1} << 63)
                                                          : rest > (uint64_t{1} << (shift - 1));
  const bool at_half = shift > 64 ? false : shift == 64 ? rest == (uint64_t{1} << 63)
                                                       : rest == (uint64_t{1} << (shift - 1));
  if (above_half || (at_half && (sticky || (q & 1)))) ++q;
  return std::ldexp(double(q), lowest);  // q <= 2^53: exact, or +inf past DBL_MAX
}

double exact_variance(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof) {
  if (has_special(sum, squares, n, ddof)) return special_variance(sum, squares, n, ddof);
  cpp_int num, den;
  numerator_denominator(sum, squares, n, ddof, num, den);
  if (num == 0) return 0.0;
  // 70 bits of quotient at least, then the remainder as the sticky bit.
  const int k = std::max(0, 70 + bits_of(den) - bits_of(num));
  cpp_int q, r;
  boost::multiprecision::divide_qr(cpp_int(num << k), den, q, r);
  return round_big(q, 2 * kExactLowestBit - k, r != 0);
}

double exact_std(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof) {
  if (has_special(sum, squares, n, ddof)) return special_variance(sum, squares, n, ddof);  // sqrt(NaN) and sqrt(+inf) are themselves
  cpp_int num, den;
  numerator_denominator(sum, squares, n, ddof, num, den);
  if (num == 0) return 0.0;
  // q = floor(num 2^(2j) / den) with at least 140 bits, so its integer root has 70;
  // floor(sqrt(floor(x))) = floor(sqrt(x)), and the root is exact only when both steps are.
  int two_j = std::max(0, 140 + bits_of(den) - bits_of(num));
  two_j += two_j & 1;
  cpp_int q, r;
  boost::multiprecision::divide_qr(cpp_int(num << two_j), den, q, r);
  cpp_int root_rest;
  const cpp_int root = boost::multiprecision::sqrt(q, root_rest);
  return round_big(root, kExactLowestBit - two_j / 2, r != 0 || root_rest != 0);
}

}  // namespace psched
