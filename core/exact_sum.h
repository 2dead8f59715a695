// ExactSum: an error-free, mergeable accumulator of doubles (a "long accumulator", as in ExBLAS).
// Every finite double is an integer multiple of 2^-1074 below 2^1024, so a fixed-point number of
// 68 signed 32-bit-weighted digits holds any sum of them exactly; adding and merging are exact and
// commutative, and the job's sum is rounded once at the end. A chunk's partial carries one (on the
// wire as a few non-overlapping doubles, terms()), the scheduler merges them, and the job's sum is
// the correctly rounded sum of its selected elements whatever the chunking, order or backend.
// The layout is shared with the CUDA backend, which adds into it with 64-bit atomics.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/platform.h"

namespace psched {

inline constexpr int kExactDigitBits = 32;
inline constexpr int kExactLowestBit = -1088;  // digit 0 has weight 2^-1088 (below 2^-1074, a multiple of 32)
inline constexpr int kExactDigits = 68;        // 68 x 32 bits cover 2^-1088 .. 2^1088
// Adds of single doubles (each under 2^32 per digit) a digit takes between normalisations before
// it could overflow int64: 2^31. Merges of normalised sums count as one add each.
inline constexpr uint64_t kExactAddsBeforeNormalize = uint64_t{1} << 31;
// Most terms() a value has: each term leaves a rest at least 53 binades lower, and the first lies
// below 2^1024, the last above 2^-1075 (2098 binades / 53, plus one).
inline constexpr size_t kExactMaxTerms = 41;

// A finite double's share of ExactSum::add: signed 32-bit pieces p0, p1, p2 for digits i, i + 1 and
// i + 2 (i = -1 for a zero). With biased exponent E and integer mantissa m (implicit bit when
// E > 0), the value is +-m 2^(max(E,1) - 1075), so m's lowest bit sits at bit p = max(E,1) + 13 of
// the accumulator; m << (p % 32) (at most 85 bits) goes into digits p / 32 .. p / 32 + 2. The one
// place the split is written: ExactSum::add and the CUDA backend's block sums
// (worker/cuda/exact_device.cuh) both take it from here.
struct ExactPieces {
  int i;
  int64_t p0, p1, p2;
};
PSCHED_HD ExactPieces exact_pieces(uint64_t bits) {  // bits: a finite double's
  const int biased = int((bits >> 52) & 0x7ff);
  uint64_t m = bits & ((uint64_t{1} << 52) - 1);
  if (m == 0 && biased == 0) return ExactPieces{-1, 0, 0, 0};  // +-0
  if (biased > 0) m |= uint64_t{1} << 52;
  const int p = (biased > 0 ? biased : 1) + 13;
  const int i = p >> 5, s = p & 31;
  const uint64_t low = m << s;                       // bits 0..63 of m << s
  const uint64_t high = s == 0 ? 0 : m >> (64 - s);  // bits 64..84
  const int64_t sign = (bits >> 63) ? -1 : 1;
  return ExactPieces{i, sign * int64_t(low & 0xffffffffu), sign * int64_t(low >> 32), sign * int64_t(high)};
}

struct ExactSum {
  // value = sum_i digit[i] * 2^(32 i - 1088). Between normalisations a digit may hold more than 32
  // bits (and either sign); normalize() brings digits 0..66 into [0, 2^32), digit 67 signed.
  int64_t digit[kExactDigits] = {};
  // NaN, +inf and -inf elements seen: they never reach the digits.
  uint32_t nan = 0, pos_inf = 0, neg_inf = 0;

  // Exact: a finite x as its three pieces (exact_pieces), NaN and infinities counted.
  PSCHED_HD void add(double x) {
    uint64_t bits;
#if defined(__CUDA_ARCH__)
    bits = uint64_t(__double_as_longlong(x));
#else
    std::memcpy(&bits, &x, sizeof bits);
#endif
    if (((bits >> 52) & 0x7ff) == 0x7ff) {
      if ((bits & ((uint64_t{1} << 52) - 1)) != 0) ++nan;
      else if (bits >> 63) ++neg_inf;
      else ++pos_inf;
      return;
    }
    const ExactPieces pieces = exact_pieces(bits);
    if (pieces.i < 0) return;
    digit[pieces.i] += pieces.p0;
    digit[pieces.i + 1] += pieces.p1;
    digit[pieces.i + 2] += pieces.p2;
  }

  // Exact merge: digit-wise add and the special counts. Both should be normalised, or far enough
  // from kExactAddsBeforeNormalize adds that their digits cannot overflow together.
  PSCHED_HD void add(const ExactSum& other) {
    for (int i = 0; i < kExactDigits; ++i) digit[i] += other.digit[i];
    nan += other.nan;
    pos_inf += other.pos_inf;
    neg_inf += other.neg_inf;
  }

  // Carry propagation: digits 0..66 into [0, 2^32), the sign in digit 67. Same value.
  void normalize();
  // The finite part is zero (after or without normalisation).
  bool finite_is_zero() const;
  // The sum correctly rounded to nearest (ties to even): NaN if any NaN was added or both
  // infinities; +-inf if only that infinity; else the exact finite sum rounded, +-inf when it
  // passes DBL_MAX by half an ulp or more. An exact zero is +0.
  double rounded() const;
  // rounded() of a sum that normalize() has just left normalised, without copying it first.
  double rounded_normalized() const;
  // The finite part as non-overlapping doubles, largest first, whose exact sum is its value (empty
  // for zero): each is the rest rounded to nearest, so a sum spanning b bits takes about b / 53
  // terms. A finite part beyond DBL_MAX (impossible in a job validate() accepts) comes out as one
  // infinity of its sign, which from_terms() counts as an infinite element.
  std::vector<double> terms() const;
  // Adds each term (and so rebuilds what terms() produced); specials are set separately.
  void add_terms(const double* terms, size_t n);
};

// An exact sum in the form the wire carries it (ExactSum in proto/psched.capnp): its finite part as
// terms() and the special counts. What a worker keeps per chunk between its backend and the wire:
// ~80 bytes where an ExactSum is 556, and rounded() is the first term, so a chunk's exact sum is
// normalised and split once. Up to kInline terms (every sum at most ~96 bits wide: a chunk's) live
// inline; a wider sum's terms are all in a vector.
class ExactTerms {
 public:
  static constexpr uint32_t kInline = 4;

  ExactTerms() = default;
  explicit ExactTerms(const ExactSum& s);
  // The terms of -+ m 2^(32 low - 1088), m the n 32-bit digits (lowest first) of a magnitude: the
  // same as ExactTerms of that value's ExactSum, without building one when m spans at most three
  // digits (the CUDA backend's compact chunk results, worker/cuda/exact_result.h).
  static ExactTerms of_magnitude(const uint32_t* digits, int n, int low, bool negative);

  const double* data() const { return n_ > kInline ? wide_.data() : inline_; }
  size_t size() const { return n_; }
  // What s.rounded() gives for the ExactSum s these terms came from (the first term is the rest
  // rounded to nearest, i.e. the whole sum rounded once), specials first.
  double rounded() const;
  // The ExactSum rebuilt (same value and specials as the source; digits not normalised).
  ExactSum value() const;

  uint32_t nan = 0, pos_inf = 0, neg_inf = 0;

 private:
  double inline_[kInline] = {};
  uint32_t n_ = 0;
  std::vector<double> wide_;
};

// Every digit and count equal after normalisation: the same exact value and the same specials.
bool same_value(const ExactSum& a, const ExactSum& b);

// The general paths of rounded() and terms() (whole-accumulator word arithmetic), which skip their
// fast path for sums no wider than 64 bits; the tests hold the two to the same bits.
namespace exact_sum_detail {
double general_rounded(const ExactSum& s);  // the finite part only
std::vector<double> general_terms(const ExactSum& s);
}  // namespace exact_sum_detail

}  // namespace psched
