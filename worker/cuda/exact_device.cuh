// The device side of the exact sum (core/exact_sum.h): whatever a thread's TwoSum expansion
// (exact_result.h) cannot hold, and at the end the expansion itself, goes into its block's
// ExactSum in shared memory as the three 32-bit pieces of ExactSum::add, a warp at a time where
// the warp's pieces share their digits. Kernel syntax: nvcc only (reduce.cu).
#pragma once

#include <cstdint>

#include "core/exact_sum.h"

namespace psched::gpu {

// A block's exact sum in shared memory: ExactSum's digits, added to with 64-bit atomics (two's
// complement makes unsigned adds of negative pieces right), and its special counts.
struct BlockExact {
  unsigned long long digit[kExactDigits];
  unsigned int nan, pos_inf, neg_inf;
};

// x's share of ExactSum::add(x) for a finite x (core/exact_sum.h's exact_pieces, the one split).
__device__ __forceinline__ ExactPieces exact_pieces(double x) {
  return psched::exact_pieces(static_cast<uint64_t>(__double_as_longlong(x)));
}

__device__ __forceinline__ void add_pieces(BlockExact& b, int i, int64_t p0, int64_t p1, int64_t p2) {
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

// All 32 lanes of a converged warp (lane: this thread's), each with a finite x: when every nonzero
// x has its pieces in the same three digits (the common case: a warp's running sums share their
// exponent), the warp adds its pieces by shuffles (32 pieces of < 2^32 stay far inside int64) and
// lane 0 makes three atomics; otherwise every lane adds its own.
__device__ __forceinline__ void add_exact_warp(BlockExact& b, double x, unsigned lane) {
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
  if (lane == 0) add_pieces(b, top, p0, p1, p2);
}

}  // namespace psched::gpu
