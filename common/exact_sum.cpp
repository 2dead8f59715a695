#include "common/exact_sum.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace psched {

void ExactSum::normalize() {
  int64_t carry = 0;
  for (int i = 0; i + 1 < kExactDigits; ++i) {
    const int64_t t = digit[i] + carry;
    digit[i] = t & 0xffffffff;
    carry = t >> 32;  // arithmetic: floor division by 2^32
  }
  digit[kExactDigits - 1] += carry;
}

double ExactSum::rounded() const {
  if (nan > 0 || (pos_inf > 0 && neg_inf > 0)) return std::numeric_limits<double>::quiet_NaN();
  if (pos_inf > 0) return std::numeric_limits<double>::infinity();
  if (neg_inf > 0) return -std::numeric_limits<double>::infinity();
  ExactSum n = *this;
  n.normalize();
  const bool negative = n.digit[kExactDigits - 1] < 0;
  // The magnitude as 32-bit words (two's complement negation when negative).
  uint64_t w[kExactDigits];
  uint64_t carry = 1;
  for (int i = 0; i < kExactDigits; ++i) {
    const uint64_t d = uint64_t(n.digit[i]) & 0xffffffffu;
    if (negative) {
      const uint64_t v = (~d & 0xffffffffu) + carry;
      w[i] = v & 0xffffffffu;
      carry = v >> 32;
    } else {
      w[i] = d;
    }
  }
  int top = kExactDigits - 1;
  while (top >= 0 && w[top] == 0) --top;
  if (top < 0) return 0.0;
  auto word = [&](int i) -> unsigned __int128 { return i >= 0 ? w[i] : 0; };
  const unsigned __int128 window = word(top) << 64 | word(top - 1) << 32 | word(top - 2);
  bool sticky = false;
  for (int i = 0; i < top - 2; ++i) sticky = sticky || w[i] != 0;
  const int lsb = 32 * (top - 2) + kExactLowestBit;  // weight of the window's bit 0
  int bits = 0;
  for (unsigned __int128 v = window; v != 0; v >>= 1) ++bits;
  const int msb = lsb + bits - 1;
  const int q = std::max(msb - 52, -1074);  // weight of the result's last bit
  const int shift = q - lsb;                // >= 1 (see the window's width)
  uint64_t kept = uint64_t(window >> shift);
  const unsigned __int128 rest = window & (((unsigned __int128)1 << shift) - 1);
  const unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
  if (rest > half || (rest == half && (sticky || (kept & 1)))) ++kept;
  const double r = std::ldexp(double(kept), q);
  return negative ? -r : r;
}

bool same_value(const ExactSum& a, const ExactSum& b) {
  ExactSum x = a, y = b;
  x.normalize();
  y.normalize();
  for (int i = 0; i < kExactDigits; ++i)
    if (x.digit[i] != y.digit[i]) return false;
  return x.nan == y.nan && x.pos_inf == y.pos_inf && x.neg_inf == y.neg_inf;
}

}  // namespace psched
