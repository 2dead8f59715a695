// The device side of the exact sum (common/exact_sum.h): a thread keeps a two-term floating-point
// expansion updated by TwoSum (error-free), and whatever the expansion cannot hold, and at the end
// the expansion itself, goes into its block's ExactSum in shared memory as the three 32-bit pieces
// of ExactSum::add, a warp at a time where the warp's pieces share their digits. Kernel syntax:
// nvcc only (reduce.cu).
#pragma once

#include <cstdint>

#include "common/exact_sum.h"

namespace psched::gpu {

// A block's exact sum in shared memory: ExactSum's digits, added to with 64-bit atomics (two's
// complement makes unsigned adds of negative pieces right), and its special counts.
struct BlockExact {
  unsigned long long digit[kExactDigits];
  unsigned int nan, pos_inf, neg_inf;
};

// x's share of ExactSum::add(x) for a finite x: pieces p0..p2 (signed) for digits i .. i + 2;
// i = -1 for a zero.
struct ExactPieces {
  int i;
  long long p0, p1, p2;
};

__device__ __forceinline__ ExactPieces exact_pieces(double x) {
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(x));
  const int biased = int((bits >> 52) & 0x7ff);
  unsigned long long m = bits & ((1ull << 52) - 1);
  if (biased == 0 && m == 0) return ExactPieces{-1, 0, 0, 0};
  if (biased > 0) m |= 1ull << 52;
  const int p = (biased > 0 ? biased : 1) + 13;
  const int i = p >> 5, s = p & 31;
  const unsigned long long low = m << s;
  const unsigned long long high = s == 0 ? 0 : m >> (64 - s);
  const long long sign = (bits >> 63) ? -1 : 1;
  return ExactPieces{i, sign * (long long)(low & 0xffffffffu), sign * (long long)(low >> 32),
                     sign * (long long)high};
}

__device__ __forceinline__ void add_pieces(BlockExact& b, int i, long long p0, long long p1,
                                           long long p2) {
  if (p0 != 0) atomicAdd(&b.digit[i], static_cast<unsigned long long>(p0));
  if (p1 != 0) atomicAdd(&b.digit[i + 1], static_cast<unsigned long long>(p1));
  if (p2 != 0) atomicAdd(&b.digit[i + 2], static_cast<unsigned long long>(p2));
}

// Any thread: x (finite) into the block's sum.
__device__ __forceinline__ void add_exact(BlockExact& b, double x) {
  const ExactPieces p = exact_pieces(x);
  if (p.i >= 0) add_pieces(b, p.i, p.p0, p.p1, p.p2);
}

// Any thread: a NaN or an infinity, counted.
__device__ __forceinline__ void add_special(BlockExact& b, double x) {
  if (x != x) atomicAdd(&b.nan, 1u);
  else if (x > 0) atomicAdd(&b.pos_inf, 1u);
  else atomicAdd(&b.neg_inf, 1u);
}

// All 32 lanes of a converged warp, each with a finite x: when every nonzero x has its pieces in
// the same three digits (the common case: a warp's running sums share their exponent), the warp
// adds its pieces by shuffles (32 pieces of < 2^32 stay far inside int64) and lane 0 makes three
// atomics; otherwise every lane adds its own.
__device__ __forceinline__ void add_exact_warp(BlockExact& b, double x) {
  const ExactPieces p = exact_pieces(x);
  int top = p.i;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) top = max(top, __shfl_xor_sync(0xffffffffu, top, d));
  if (top < 0) return;  // all zero
  if (!__all_sync(0xffffffffu, p.i == top || p.i < 0)) {
    if (p.i >= 0) add_pieces(b, p.i, p.p0, p.p1, p.p2);
    return;
  }
  long long p0 = p.p0, p1 = p.p1, p2 = p.p2;
#pragma unroll
  for (int d = 16; d > 0; d /= 2) {
    p0 += __shfl_xor_sync(0xffffffffu, p0, d);
    p1 += __shfl_xor_sync(0xffffffffu, p1, d);
    p2 += __shfl_xor_sync(0xffffffffu, p2, d);
  }
  if (threadIdx.x % 32 == 0) add_pieces(b, top, p0, p1, p2);
}

// A thread's running exact sum: value = hi + lo exactly (plus what it flushed to the block).
struct Expansion {
  double hi = 0.0, lo = 0.0;

  // Adds a finite v. TwoSum(hi, v) then TwoSum(lo, error); a nonzero second error (the sum spans
  // more than the two terms hold) goes to the block, as does v itself when hi + v would overflow.
  // TwoSum is error-free whenever its sum does not overflow (Boldo, Graillat, Muller 2017).
  __device__ __forceinline__ void add(double v, BlockExact& b) {
    const double s = __dadd_rn(hi, v);
    if (fabs(s) > 1.7976931348623157e308) {  // overflow: rare, keep v out of the expansion
      add_exact(b, v);
      return;
    }
    const double bv = __dsub_rn(s, hi);
    const double e = __dadd_rn(__dsub_rn(hi, __dsub_rn(s, bv)), __dsub_rn(v, bv));
    const double t = __dadd_rn(lo, e);
    const double bt = __dsub_rn(t, lo);
    const double f = __dadd_rn(__dsub_rn(lo, __dsub_rn(t, bt)), __dsub_rn(e, bt));
    hi = s;
    lo = t;
    if (f != 0.0) add_exact(b, f);
  }

  // All 32 lanes of a converged warp: the expansion into the block's sum.
  __device__ __forceinline__ void flush_warp(BlockExact& b) const {
    add_exact_warp(b, hi);
    add_exact_warp(b, lo);
  }
};

// Order-preserving keys for min and max by 64-bit atomicMax (NaN never reaches them): u(x) is
// increasing in x and at least 1, so 0 means "none"; the min is kept as ~u(x).
__device__ __forceinline__ unsigned long long order_key(double x) {
  const unsigned long long bits = static_cast<unsigned long long>(__double_as_longlong(x));
  return (bits >> 63) ? ~bits : bits | (1ull << 63);
}
__device__ __forceinline__ double from_order_key(unsigned long long key) {
  const unsigned long long bits = (key >> 63) ? key & ~(1ull << 63) : ~key;
  return __longlong_as_double(static_cast<long long>(bits));
}

}  // namespace psched::gpu
