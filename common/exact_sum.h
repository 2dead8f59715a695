// ExactSum: an error-free, mergeable accumulator of doubles (a "long accumulator", as in ExBLAS).
// Every finite double is an integer multiple of 2^-1074 below 2^1024, so 68 digits of 32-bit
// weight hold any sum of them exactly; adding and merging are exact and commutative, and a sum is
// rounded once at the end. The layout is shared with the CUDA backend, which adds into it with
// 64-bit atomics (worker/cuda/exact_device.cuh).
// (Minimal version of the issue-16 host side, enough for the CUDA backend; the host branch's
// header replaces it on merge.)
#pragma once

#include <cstdint>
#include <cstring>

#include "common/platform.h"

namespace psched {

inline constexpr int kExactDigitBits = 32;
inline constexpr int kExactLowestBit = -1088;  // digit 0 has weight 2^-1088 (below 2^-1074, a multiple of 32)
inline constexpr int kExactDigits = 68;        // 68 x 32 bits cover 2^-1088 .. 2^1088

struct ExactSum {
  // value = sum_i digit[i] * 2^(32 i - 1088); between normalisations a digit may hold more than 32
  // bits (2^31 adds of headroom) and either sign.
  int64_t digit[kExactDigits] = {};
  uint32_t nan = 0, pos_inf = 0, neg_inf = 0;  // NaN / +inf / -inf elements seen

  // Exact. Finite x: biased exponent E, integer mantissa m (implicit bit when E > 0), value
  // +-m 2^(max(E,1) - 1075); m's lowest bit sits at bit p = max(E,1) + 13, and m << (p % 32) goes
  // into digits p / 32 .. p / 32 + 2 as three 32-bit pieces.
  PSCHED_HD void add(double x) {
    uint64_t bits;
#if defined(__CUDA_ARCH__)
    bits = uint64_t(__double_as_longlong(x));
#else
    std::memcpy(&bits, &x, sizeof bits);
#endif
    const int biased = int((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((uint64_t{1} << 52) - 1);
    const bool negative = (bits >> 63) != 0;
    if (biased == 0x7ff) {
      if (m != 0) ++nan;
      else if (negative) ++neg_inf;
      else ++pos_inf;
      return;
    }
    if (biased > 0) m |= uint64_t{1} << 52;
    const int p = (biased > 0 ? biased : 1) + 13;
    const int i = p >> 5, s = p & 31;
    const uint64_t low = m << s;
    const uint64_t high = s == 0 ? 0 : m >> (64 - s);
    const int64_t p0 = int64_t(low & 0xffffffffu), p1 = int64_t(low >> 32), p2 = int64_t(high);
    const int64_t sign = negative ? -1 : 1;
    digit[i] += sign * p0;
    digit[i + 1] += sign * p1;
    digit[i + 2] += sign * p2;
  }

  PSCHED_HD void add(const ExactSum& other) {
    for (int i = 0; i < kExactDigits; ++i) digit[i] += other.digit[i];
    nan += other.nan;
    pos_inf += other.pos_inf;
    neg_inf += other.neg_inf;
  }

  // Carry propagation: digits 0..66 into [0, 2^32), the sign in digit 67. Same value.
  void normalize();
  // Correctly rounded to nearest (ties to even); NaN if a NaN or both infinities were added, an
  // infinity if only that one; an exact zero is +0.
  double rounded() const;
};

// Every digit and count equal after normalisation.
bool same_value(const ExactSum& a, const ExactSum& b);

}  // namespace psched
