// The proof that lets a run's lo additions go plain (reduce_impl.h, optimistic_registers): what
// every lane and element is a whole multiple of, and the bound that keeps lo a double's worth of
// those multiples. Part of the CPU kernels' body (kernels_impl.h): internal linkage only.
#pragma once

#include <cstdint>

#include "worker/cpu/kernels.h"
#include "worker/cpu/lanes_impl.h"

namespace psched {
namespace {

// The exponent of x's lowest set bit (x finite, nonzero): x is a whole multiple of 2 to that.
inline int lowest_bit_exponent(double x) {
  uint64_t bits;
  __builtin_memcpy(&bits, &x, sizeof(bits));
  const int biased = int((bits >> 52) & 0x7ff);
  const uint64_t mantissa = (bits & ((uint64_t{1} << 52) - 1)) | (biased ? uint64_t{1} << 52 : 0);
  return (biased ? biased : 1) - 1075 + __builtin_ctzll(mantissa);
}

// log2 of the least of the lowest bits of the lanes' hi and lo (kQuantumNone: all zero).
inline int lanes_quantum(const ReduceLanes& lanes) {
  int quantum = kQuantumNone;
  for (int l = 0; l < 8; ++l) {
    if (lanes.hi[l] != 0) {
      const int q = lowest_bit_exponent(lanes.hi[l]);
      quantum = q < quantum ? q : quantum;
    }
    if (lanes.lo[l] != 0) {
      const int q = lowest_bit_exponent(lanes.lo[l]);
      quantum = q < quantum ? q : quantum;
    }
  }
  return quantum;
}

// Whether optimistic_registers' plain additions to one expansion's lo were all exact, from what it
// saw: the lanes as they were (`was`; their quantum from the run before, or from their lanes) and
// as they are (hi, lo), m registers' elements in each lane, a bound on their magnitude `largest`,
// and `quantum`: log2 of a power of two every element is a whole multiple of (kQuantumNone: every
// element was zero). On success, `quantum` is the Q the proof used, which hi and lo now are
// multiples of.
//
// Let Q be a power of two that hi, lo and every element started as whole multiples of (the least of
// their lowest bits; an element's lowest bit is at least 2^(its exponent - 52)). Then each t =
// fl(hi + v) is a multiple of Q (hi + v is; below 2^53 Q it is t itself, and from 2^53 Q up t's
// own last place is 2Q or more), so TwoSum's error e = hi + v - t is too, and lo + e is a
// multiple of Q, which a double holds exactly while |lo + e| <= 2^53 Q: every addition to lo was
// exact if |lo| plus the sum of every |e| stays there. Rounding to nearest gives |e| <= 2^-53 |t|,
// and |t| <= (|hi| + m largest)(1 + 2^-53)^m, under (|hi| + m largest)(1 + 2^-21) for any run
// below 2^31 registers (runs are at most kOptimisticBlock elements); the bound is computed with
// that margin, which also covers its own roundings. NaNs and infinities (which min and max do not
// see) leave hi or lo NaN or infinite.
inline bool lo_adds_exact(const ReduceLanes& was, const double* hi, const double* lo, uint64_t m, double largest,
                          int& quantum) {
  const int start = was.quantum != kQuantumUnknown ? was.quantum : lanes_quantum(was);
  quantum = start < quantum ? start : quantum;
  double start_hi = 0, start_lo = 0;
  for (int l = 0; l < 8; ++l) {
    if (!(__builtin_fabs(hi[l]) <= 0x1.fffffffffffffp1023) || !(__builtin_fabs(lo[l]) <= 0x1.fffffffffffffp1023))
      return false;
    start_hi = __builtin_fabs(was.hi[l]) > start_hi ? __builtin_fabs(was.hi[l]) : start_hi;
    start_lo = __builtin_fabs(was.lo[l]) > start_lo ? __builtin_fabs(was.lo[l]) : start_lo;
  }
  if (quantum == kQuantumNone) return true;  // every term zero: nothing was added
  constexpr double kMargin = 1 + 0x1p-21;
  const double t_bound = (start_hi + double(m) * largest) * kMargin;
  const double lo_bound = (start_lo + double(m) * 0x1p-53 * t_bound) * kMargin;
  // 2^53 Q as a double (Q is at least 2^-1074, so this is at least 2^-1021; above 2^1023, 2^1023).
  const uint64_t limit_bits = uint64_t((quantum + 53 < 1023 ? quantum + 53 : 1023) + 1023) << 52;
  double limit;
  __builtin_memcpy(&limit, &limit_bits, sizeof(limit));
  return t_bound <= 0x1.fffffffffffffp1023 && lo_bound <= limit;
}

// Runs at least this long try optimistic_registers first: below, its check would cost more than
// the adds it saves. After a run it could not prove, the next kOptimismRest runs go the exact way
// at once, so data that keeps failing (magnitudes over tens of decades, a fill value in most rows)
// pays for a second pass one run in 16; then it is tried again.
constexpr uint64_t kOptimisticLeast = 256;
constexpr uint32_t kOptimismRest = 15;
// A longer run is reduced (and proven) in runs of this many elements, a multiple of 8 so each
// element keeps its lane: the bound grows with the square of a run's length, and a whole 80 MB
// chunk as one run of normal(0, 1) elements failed it where its 1 MiB pieces pass.
constexpr uint64_t kOptimisticBlock = uint64_t{1} << 14;

// log2 of powers of two that elements of at least a magnitude are whole multiples of, and their
// squares' high and low parts (with |v| >= 2^e: h of 2^(2e - 52), l of 2^(2e - 104), each at least
// 2^-1074, every double's), from that magnitude's bits (0: no nonzero element: kQuantumNone).
struct ElementQuanta {
  int sum, high, low;
};
inline ElementQuanta element_quanta(uint64_t least_bits) {
  if (least_bits == 0) return ElementQuanta{kQuantumNone, kQuantumNone, kQuantumNone};
  const int biased = int(least_bits >> 52);
  const int exponent = biased ? biased - 1023 : -1074;  // |v| >= 2^exponent
  return ElementQuanta{(biased ? biased : 1) - 1075, 2 * exponent - 52 > -1074 ? 2 * exponent - 52 : -1074,
                       2 * exponent - 104 > -1074 ? 2 * exponent - 104 : -1074};
}

// A run's registers of lanes as reduce_run keeps them: the sum's expansions, min and max, and a
// var/std job's two square expansions (high and low parts).
struct RunRegisters {
  vd* hi;
  vd* lo;
  vd* mn;
  vd* mx;
  vd* shi;
  vd* slo;
  vd* lhi;
  vd* llo;
};

// One expansion's registers as eight doubles each (lane q * kW + k).
template <int kRegs>
inline __attribute__((always_inline)) void lanes_of(const vd* r, double* out) {
  for (int q = 0; q < kRegs; ++q)
    for (int k = 0; k < kW; ++k) out[q * kW + k] = r[q][k];
}

// TwoSum's first step into (hi, lo) with lo's addition plain.
inline __attribute__((always_inline)) void add_plain(vd& hi, vd& lo, vd v) {
  const vd t = hi + v, bv = t - hi, e = (hi - (t - bv)) + (v - bv);
  hi = t;
  lo = lo + e;
}

}  // namespace
}  // namespace psched
