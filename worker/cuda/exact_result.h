// What the CUDA backend's exact reduction keeps per chunk and copies back, and the arithmetic of it
// that host and device share (PSCHED_HD), so host tests (tests/worker/cuda_exact_result_test.cpp)
// check the very code the kernels run: a thread's TwoSum expansion, the order keys of min and max,
// and the compact result a chunk's accumulator becomes. Plain C++ where it is not compiled by nvcc.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/exact_sum.h"
#include "core/platform.h"

#if defined(__CUDA_ARCH__)
#define PSCHED_UNROLL _Pragma("unroll")
#else
#define PSCHED_UNROLL
#endif

namespace psched::gpu {

// A chunk's reduction on the device: its blocks add into one of these (zeroed before the launch).
struct ChunkAccumulator {
  ExactSum exact;
  unsigned long long min_key, max_key;  // order keys (order_key below); 0: none yet
};

// An exact sum as copied back to the host, compactly: the nonzero 32-bit digits of its magnitude
// after carry propagation (a full ExactSum is 556 bytes, which batches of thousands of small
// chunks would pay in PCIe time). A sum wider than the window, or with NaN/inf elements counted,
// is `wide`: the host reads the accumulator it came from instead.
constexpr int kResultWindowDigits = 6;
struct CompactExact {
  uint32_t window[kResultWindowDigits];  // |sum|'s digits low .. low + 5
  int16_t low;
  uint8_t negative;
  uint8_t wide;
};

// A chunk's result as copied back to the host: its exact sum compactly, min and max.
struct ChunkResult : CompactExact {
  double min, max;  // +inf, -inf for an empty selection
};

// Where a var/std job's squares go (JobSpec::squares): an accumulator per chunk (zeroed before the
// launch) and its compact result, as the sum's; both null for a job that asks for no squares.
struct SquareOutput {
  ExactSum* acc = nullptr;
  CompactExact* results = nullptr;
  bool wanted() const { return acc != nullptr; }
};

PSCHED_HD uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

PSCHED_HD double double_of(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// Additions rounded once each, never contracted or reassociated (host code builds with
// -ffp-contract=off; the device says so explicitly).
PSCHED_HD double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
PSCHED_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

// A thread's running exact sum: hi + lo exactly, besides what add() handed back.
struct Expansion {
  double hi = 0.0, lo = 0.0;

  // Adds a finite v by TwoSum(hi, v) and TwoSum(lo, that error) and returns what the two terms
  // could not hold, for the caller to add to the exact sum (0 almost always): the second error,
  // or v itself when hi + v would overflow. TwoSum is error-free whenever its sum does not
  // overflow (Boldo, Graillat, Muller 2017), and lo, a sum of at most 2^31 errors each under
  // 2^970, cannot.
  PSCHED_HD double add(double v) {
    const double s = add_rn(hi, v);
    if (!(s <= 1.7976931348623157e308 && s >= -1.7976931348623157e308)) return v;
    const double bv = sub_rn(s, hi);
    const double e = add_rn(sub_rn(hi, sub_rn(s, bv)), sub_rn(v, bv));
    const double t = add_rn(lo, e);
    const double bt = sub_rn(t, lo);
    const double f = add_rn(sub_rn(lo, sub_rn(t, bt)), sub_rn(e, bt));
    hi = s;
    lo = t;
    return f;
  }

  // add(v), and where it hands something back, the expansion's own terms after it, the expansion
  // left empty: `spill` takes each (three finite values, zeros included). Left as it was, an
  // expansion that cannot hold an element beside what it holds hands one back for nearly every
  // element after it: one huge element among ordinary ones (a fill value such as netCDF's 9.97e36)
  // made each later element of its thread an add to the block's shared sum. Emptied, it costs that
  // element's add and at most one more.
  template <typename Spill>
  PSCHED_HD void add_or_empty(double v, Spill&& spill) {
    const double rest = add(v);
    if (rest == 0.0) return;
    spill(rest);
    spill(hi);
    spill(lo);
    hi = lo = 0.0;
  }
};

// Order keys for min and max kept by 64-bit atomicMax (NaN never reaches them): order_key(x) is
// increasing in x and at least 1, so 0 means "none"; the min is kept as ~order_key(x).
PSCHED_HD unsigned long long order_key(double x) {
  const uint64_t bits = bits_of(x);
  return (bits >> 63) ? ~bits : bits | (uint64_t{1} << 63);
}
PSCHED_HD double from_order_key(unsigned long long key) {
  return double_of((key >> 63) ? key & ~(uint64_t{1} << 63) : ~key);
}

// An exact sum's compact form: digits carried, the magnitude's nonzero window (or wide). On the
// device one thread per chunk runs it with the digits in registers (every loop unrolled).
PSCHED_HD CompactExact compact_exact(const ExactSum& sum) {
  int64_t d[kExactDigits];
  PSCHED_UNROLL
  for (int i = 0; i < kExactDigits; ++i) d[i] = sum.digit[i];
  int64_t carry = 0;
  PSCHED_UNROLL
  for (int i = 0; i + 1 < kExactDigits; ++i) {
    const int64_t t = d[i] + carry;
    d[i] = t & 0xffffffff;
    carry = t >> 32;  // arithmetic: floor division by 2^32
  }
  d[kExactDigits - 1] += carry;
  const bool negative = d[kExactDigits - 1] < 0;
  if (negative) {  // the magnitude: two's complement negation, digit by digit
    int64_t c = 1;
    PSCHED_UNROLL
    for (int i = 0; i < kExactDigits; ++i) {
      const int64_t t = (~d[i] & 0xffffffff) + c;
      d[i] = t & 0xffffffff;
      c = t >> 32;
    }
  }
  int lowest = kExactDigits, highest = -1;
  PSCHED_UNROLL
  for (int i = 0; i < kExactDigits; ++i) {
    if (d[i] != 0) {
      lowest = lowest < i ? lowest : i;
      highest = i;
    }
  }
  if (highest < 0) lowest = 0;
  CompactExact r{};
  r.negative = negative;
  r.low = int16_t(lowest);
  r.wide = highest - lowest >= kResultWindowDigits || sum.nan != 0 || sum.pos_inf != 0 || sum.neg_inf != 0;
  if (!r.wide) {
    PSCHED_UNROLL
    for (int i = 0; i < kExactDigits; ++i) {
      const int k = i - lowest;
      if (k >= 0 && k < kResultWindowDigits) r.window[k] = uint32_t(d[i]);
    }
  }
  return r;
}

// The chunk's result from its accumulator: the compact exact sum, min and max from their keys.
PSCHED_HD ChunkResult compact_result(const ChunkAccumulator& a) {
  ChunkResult r{};
  static_cast<CompactExact&>(r) = compact_exact(a.exact);
  r.min = a.min_key ? from_order_key(~a.min_key) : double_of(0x7ff0000000000000ull);
  r.max = a.max_key ? from_order_key(a.max_key) : double_of(0xfff0000000000000ull);
  return r;
}

// The exact sum of a compact result; a wide one is its accumulator's (copied back by the caller).
inline ExactSum exact_from(const CompactExact& r, const ExactSum* wide_accumulator) {
  if (r.wide) return *wide_accumulator;
  ExactSum e;
  for (int k = 0; k < kResultWindowDigits; ++k) {
    const int64_t v = int64_t(r.window[k]);
    if (v != 0) e.digit[r.low + k] = r.negative ? -v : v;
  }
  return e;
}
inline ExactSum exact_from(const ChunkResult& r, const ChunkAccumulator* wide_accumulator) {
  return exact_from(r, wide_accumulator ? &wide_accumulator->exact : nullptr);
}

// The same as ExactTerms, without building the ExactSum when the result is not wide.
inline ExactTerms exact_terms_from(const CompactExact& r, const ExactSum* wide_accumulator) {
  if (r.wide) return ExactTerms(*wide_accumulator);
  return ExactTerms::of_magnitude(r.window, kResultWindowDigits, r.low, r.negative != 0);
}
inline ExactTerms exact_terms_from(const ChunkResult& r, const ChunkAccumulator* wide_accumulator) {
  return exact_terms_from(r, wide_accumulator ? &wide_accumulator->exact : nullptr);
}

}  // namespace psched::gpu
