#include "core/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace psched {
namespace {

static_assert(kExactDigits % 4 == 0, "digits are scanned four at a time");

// The lowest and highest nonzero digit (kExactDigits and -1 when all are zero), four digits at a
// time: a chunk's sum has a few nonzero digits among 68, and these scans are most of the work of
// normalising and splitting it.
int lowest_nonzero(const int64_t* d) {
  for (int b = 0; b < kExactDigits; b += 4) {
    if ((d[b] | d[b + 1] | d[b + 2] | d[b + 3]) == 0) continue;
    for (int i = b;; ++i)
      if (d[i] != 0) return i;
  }
  return kExactDigits;
}
int highest_nonzero(const int64_t* d) {
  for (int b = kExactDigits - 4; b >= 0; b -= 4) {
    if ((d[b] | d[b + 1] | d[b + 2] | d[b + 3]) == 0) continue;
    for (int i = b + 3;; --i)
      if (d[i] != 0) return i;
  }
  return -1;
}

constexpr int kWords = kExactDigits + 2;  // the magnitude's 32-bit words, digit 67 takes two, one spare
constexpr int kSubnormalLsb = -1074 - kExactLowestBit;  // bit 14: the weight of the smallest double

// |value| of a normalised sum as 32-bit words (little-endian); `negative` gets the sign.
void magnitude(const ExactSum& s, uint32_t (&w)[kWords], bool& negative) {
  for (int i = 0; i + 1 < kExactDigits; ++i) w[i] = uint32_t(s.digit[i]);
  const int64_t top = s.digit[kExactDigits - 1];
  w[kExactDigits - 1] = uint32_t(uint64_t(top));
  w[kExactDigits] = uint32_t(uint64_t(top) >> 32);
  negative = top < 0;
  w[kExactDigits + 1] = negative ? ~0u : 0u;  // the sign, extended
  if (!negative) return;
  // Two's complement over the words: invert and add one. The top is far below 2^63 (sums of at
  // most 2^55 doubles), so the result fits.
  uint64_t carry = 1;
  for (int i = 0; i < kWords; ++i) {
    const uint64_t v = uint64_t(uint32_t(~w[i])) + carry;
    w[i] = uint32_t(v);
    carry = v >> 32;
  }
}

// Bits [pos, pos + 64) of the words (pos >= 0).
uint64_t bits_at(const uint32_t (&w)[kWords], int pos) {
  const int k = pos >> 5, off = pos & 31;
  unsigned __int128 v = 0;
  for (int j = 2; j >= 0; --j) v = (v << 32) | (k + j < kWords ? w[k + j] : 0u);
  return uint64_t(v >> off);
}

// Any bit below `pos` set.
bool any_below(const uint32_t (&w)[kWords], int pos) {
  const int k = pos >> 5, off = pos & 31;
  for (int i = 0; i < k; ++i)
    if (w[i] != 0) return true;
  return off != 0 && (w[k] & ((uint32_t{1} << off) - 1)) != 0;
}

// The finite part of a normalised sum, correctly rounded to nearest-even.
double round_normalized(const ExactSum& s) {
  uint32_t w[kWords];
  bool negative;
  magnitude(s, w, negative);
  int h = kWords - 1;
  while (h >= 0 && w[h] == 0) --h;
  if (h < 0) return 0.0;
  const int top_bit = 32 * h + 31 - __builtin_clz(w[h]);
  // The result's lowest mantissa bit: 52 below the top for a normal double, 2^-1074 at least.
  int lsb = top_bit - 52 > kSubnormalLsb ? top_bit - 52 : kSubnormalLsb;
  const int width = top_bit - lsb + 1;  // 1..53
  uint64_t mantissa = bits_at(w, lsb) & ((uint64_t{1} << width) - 1);
  const bool round_bit = (bits_at(w, lsb - 1) & 1) != 0;
  if (round_bit && ((mantissa & 1) != 0 || any_below(w, lsb - 1))) {
    ++mantissa;
    if (mantissa == (uint64_t{1} << 53)) {
      mantissa >>= 1;
      ++lsb;
    }
  }
  // Exact unless it overflows, which gives the infinity round-to-nearest must.
  const double magnitude_value = std::ldexp(double(mantissa), lsb + kExactLowestBit);
  return negative ? -magnitude_value : magnitude_value;
}

bool normalized_is_zero(const ExactSum& s) { return highest_nonzero(s.digit) < 0; }

// m 2^e, m < 2^96, split into its first term (m rounded to 53 bits, nearest-even: what
// round_normalized gives) and the rest, m minus that, below 2^43 in magnitude: one exact double.
// Both stay normal doubles for e in [-1000, 900].
void split_narrow(unsigned __int128 m, int e, double& first, double& rest) {
  const int width = 128 - (uint64_t(m >> 64) != 0 ? __builtin_clzll(uint64_t(m >> 64))
                                                  : 64 + __builtin_clzll(uint64_t(m)));
  int shift = width > 53 ? width - 53 : 0;
  uint64_t mantissa = uint64_t(m >> shift);
  if (shift > 0) {
    const unsigned __int128 dropped = m & (((unsigned __int128)1 << shift) - 1);
    const unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
    if (dropped > half || (dropped == half && (mantissa & 1) != 0)) {
      if (++mantissa == uint64_t{1} << 53) {
        mantissa >>= 1;
        ++shift;
      }
    }
  }
  const __int128 r = __int128(m) - __int128((unsigned __int128)mantissa << shift);  // |r| <= 2^42
  first = std::ldexp(double(mantissa), e + shift);
  rest = std::ldexp(double(int64_t(r)), e);
}

// The common case, fast (a chunk's sum: a few digits wide): a normalised, non-negative sum whose
// nonzero digits are at most three adjacent ones, far from the subnormal and overflow ranges, is an
// integer m < 2^96 times 2^e (split_narrow). Returns false where the general path must run. The
// tests hold the two paths to the same bits ("the fast path of rounded() and terms() gives the
// general path's bits").
bool narrow_terms(const ExactSum& s, double& first, double& rest) {
  const int h = highest_nonzero(s.digit);
  if (h == kExactDigits - 1) return false;  // negative
  if (h < 0) {
    first = rest = 0.0;
    return true;
  }
  const int l = h >= 2 ? h - 2 : 0;
  if (lowest_nonzero(s.digit) < l) return false;
  const int e = kExactDigitBits * l + kExactLowestBit;
  if (e < -1000 || e > 900) return false;
  unsigned __int128 m = 0;
  for (int i = h; i >= l; --i) m = (m << kExactDigitBits) | uint64_t(s.digit[i]);
  split_narrow(m, e, first, rest);
  return true;
}

std::vector<double> terms_of_normalized(ExactSum rest);

}  // namespace

// Carries digit by digit from the lowest nonzero one, and stops past the highest once nothing is
// carried: a chunk's sum touches a few digits of the 68, so this is a few steps, not 67.
void ExactSum::normalize() {
  const int top = highest_nonzero(digit);
  int64_t carry = 0;
  int i = lowest_nonzero(digit);
  for (; i + 1 < kExactDigits; ++i) {
    if (i > top && carry == 0) return;
    const int64_t t = digit[i] + carry;
    carry = t >> kExactDigitBits;  // arithmetic: floor division by 2^32
    digit[i] = t - carry * (int64_t{1} << kExactDigitBits);
  }
  digit[kExactDigits - 1] += carry;
}

bool ExactSum::finite_is_zero() const {
  ExactSum copy = *this;
  copy.normalize();
  return normalized_is_zero(copy);
}

double ExactSum::rounded() const {
  if (nan != 0 || pos_inf != 0 || neg_inf != 0) return rounded_normalized();  // the specials decide
  ExactSum copy = *this;
  copy.normalize();
  return copy.rounded_normalized();
}

double ExactSum::rounded_normalized() const {
  if (nan != 0 || (pos_inf != 0 && neg_inf != 0)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf != 0) return std::numeric_limits<double>::infinity();
  if (neg_inf != 0) return -std::numeric_limits<double>::infinity();
  if (double first, rest; narrow_terms(*this, first, rest)) return first;
  return round_normalized(*this);
}

namespace exact_sum_detail {

double general_rounded(const ExactSum& s) {
  ExactSum copy = s;
  copy.normalize();
  return round_normalized(copy);
}

std::vector<double> general_terms(const ExactSum& s) {
  ExactSum rest;
  std::memcpy(rest.digit, s.digit, sizeof s.digit);
  rest.normalize();
  return terms_of_normalized(rest);
}

}  // namespace exact_sum_detail

std::vector<double> ExactSum::terms() const {
  const ExactTerms t(*this);  // the one place a sum is split
  return std::vector<double>(t.data(), t.data() + t.size());
}

namespace {

// Term by term: each the rest rounded to nearest, subtracted exactly.
std::vector<double> terms_of_normalized(ExactSum rest) {
  std::vector<double> out;
  while (!normalized_is_zero(rest)) {
    const double t = round_normalized(rest);
    if (!std::isfinite(t)) return {t};  // beyond DBL_MAX: only the first (largest) term can be
    out.push_back(t);
    rest.add(-t);  // exact: the rest shrinks by about 53 bits per term
    rest.normalize();
  }
  PSCHED_ASSERT(out.size() <= kExactMaxTerms, out.size());
  return out;
}

}  // namespace

ExactTerms::ExactTerms(const ExactSum& s) : nan(s.nan), pos_inf(s.pos_inf), neg_inf(s.neg_inf) {
  ExactSum rest;
  std::memcpy(rest.digit, s.digit, sizeof s.digit);
  rest.normalize();
  if (double first, second; narrow_terms(rest, first, second)) {
    if (first != 0.0) inline_[n_++] = first;
    if (second != 0.0) inline_[n_++] = second;
    return;
  }
  wide_ = terms_of_normalized(rest);
  n_ = uint32_t(wide_.size());
  if (n_ <= kInline) {
    std::copy(wide_.begin(), wide_.end(), inline_);
    wide_.clear();
  }
}

ExactTerms ExactTerms::of_magnitude(const uint32_t* digits, int n, int low, bool negative) {
  int h = n - 1;
  while (h >= 0 && digits[h] == 0) --h;
  if (h < 0) return ExactTerms{};
  const int l = h >= 2 ? h - 2 : 0;
  const int e = kExactDigitBits * (low + l) + kExactLowestBit;
  bool narrow = e >= -1000 && e <= 900;
  for (int k = 0; narrow && k < l; ++k) narrow = digits[k] == 0;
  if (!narrow) {
    ExactSum s;
    for (int k = 0; k < n; ++k)  // a window may reach past digit 67 with zeros: only nonzero ones
      if (digits[k] != 0) s.digit[low + k] = negative ? -int64_t(digits[k]) : int64_t(digits[k]);
    return ExactTerms(s);
  }
  unsigned __int128 m = 0;
  for (int k = h; k >= l; --k) m = (m << kExactDigitBits) | digits[k];
  double first, rest;
  split_narrow(m, e, first, rest);
  ExactTerms t;
  t.inline_[t.n_++] = negative ? -first : first;
  if (rest != 0.0) t.inline_[t.n_++] = negative ? -rest : rest;
  return t;
}

double ExactTerms::rounded() const {
  if (nan != 0 || (pos_inf != 0 && neg_inf != 0)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf != 0) return std::numeric_limits<double>::infinity();
  if (neg_inf != 0) return -std::numeric_limits<double>::infinity();
  return n_ == 0 ? 0.0 : data()[0];
}

ExactSum ExactTerms::value() const {
  ExactSum e;
  e.add_terms(data(), size());
  e.nan = nan;
  e.pos_inf = pos_inf;
  e.neg_inf = neg_inf;
  return e;
}

void ExactSum::add_terms(const double* t, size_t n) {
  for (size_t i = 0; i < n; ++i) add(t[i]);
}

bool same_value(const ExactSum& a, const ExactSum& b) {
  ExactSum x = a, y = b;
  x.normalize();
  y.normalize();
  return std::memcmp(x.digit, y.digit, sizeof x.digit) == 0 && x.nan == y.nan &&
         x.pos_inf == y.pos_inf && x.neg_inf == y.neg_inf;
}

}  // namespace psched
