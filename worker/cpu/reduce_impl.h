// Reducing a strided run of stored elements into the eight lanes of ReduceLanes (kernels.h's
// `reduce`): TwoSum per lane on registers, the rare register that needs it added lane by lane with
// spills into the exact accumulator; a run of 256 elements or more first with lo's additions plain,
// proven exact afterwards (plain_adds_impl.h). Part of the CPU kernels' body (kernels_impl.h):
// internal linkage only.
#pragma once

#include <cstdint>

#include "worker/cpu/kernels.h"
#include "worker/cpu/lanes_impl.h"
#include "worker/cpu/plain_adds_impl.h"

namespace psched {
namespace {

// On the scalar path, magnitudes from here up (and NaN, infinities) bypass the lanes into the exact
// accumulator: a lane of at most 2^31 smaller ones stays below 2^991, so neither hi nor lo can
// overflow and TwoSum stays error-free. (The vector path lets a large value in while nothing
// overflows; an overflow shows in e2 and sends the register here.)
constexpr double kLaneLimit = 0x1p960;

// One element into one lane, scalar: the tail of a run, and a register that needs spills.
inline __attribute__((always_inline)) void lane_add(ReduceLanes& lanes, int l, double v) {
  lanes.min[l] = v < lanes.min[l] ? v : lanes.min[l];
  lanes.max[l] = v > lanes.max[l] ? v : lanes.max[l];
  if (!(__builtin_fabs(v) < kLaneLimit)) return lanes_spill(lanes, v);
  // TwoSum (Knuth): hi + v = t + e exactly; then lo + e = t2 + e2 exactly.
  const double hi = lanes.hi[l], t = hi + v, bv = t - hi, e = (hi - (t - bv)) + (v - bv);
  const double lo = lanes.lo[l], t2 = lo + e, be = t2 - lo, e2 = (lo - (t2 - be)) + (e - be);
  if (e2 != 0) {
    // lo cannot hold this error beside what it holds: the lane's terms go to the exact sum with it
    // and the lane starts again from zero. Left as it was, one huge element among ordinary ones (a
    // fill value such as netCDF's 9.97e36) made nearly every later element of its lane a spill and
    // its register the slow path: 0.01 % of them took a 2 GB .npy about 11 x as long
    // (bench/fill_values.sh).
    lanes_spill(lanes, e2);
    lanes_spill(lanes, t);
    lanes_spill(lanes, t2);
    lanes.hi[l] = lanes.lo[l] = 0.0;
    return;
  }
  lanes.hi[l] = t;
  lanes.lo[l] = t2;
}

// One register's worth of a run's elements at p, `step` apart. `beyond` says an element of the run
// lies past this register's last.
inline __attribute__((always_inline)) vd load_register(const double* p, uint64_t step, bool beyond) {
  vd v;
  if (step == 1) {
    __builtin_memcpy(&v, p, sizeof(v));
  } else if (step == 2 && beyond) {
    // Every other element (the DeepOps benchmark's [::2]): two plain loads and one shuffle instead
    // of kW single loads. The second load reaches one element past this register's last, which
    // exists: a later element of the run lies beyond it.
    vd a, b;
    __builtin_memcpy(&a, p, sizeof(a));
    __builtin_memcpy(&b, p + kW, sizeof(b));
    v = every_other_lane<0>(a, b);
  } else {
    for (int l = 0; l < kW; ++l) v[l] = p[uint64_t(l) * step];
  }
  return v;
}

// Register q of the 8 elements from j of a run, as the sums take them: scale * x + offset, or x
// as loaded (Identity).
template <bool Identity>
inline __attribute__((always_inline)) vd run_register(const double* x, uint64_t step, uint64_t n, uint64_t j,
                                                      int q, double scale, double offset) {
  const vd loaded = load_register(x + (j + uint64_t(q) * kW) * step, step, j + uint64_t(q + 1) * kW < n);
  return Identity ? loaded : loaded * scale + offset;
}

// A register's expansion as the slow path leaves it.
struct LanePair {
  vd hi, lo;
};

// Register q's elements v one by one through lane_add, from the lanes as they were (hi, lo);
// returns the lanes as lane_add left them. Out of line, and every register by value: with the
// caller's registers passed by reference (and written lane by lane), GCC kept the hot loop's
// expansion in memory, a store and a reload every iteration on its critical path.
[[gnu::noinline]] LanePair register_by_lanes(ReduceLanes& lanes, int q, vd v, vd hi, vd lo) {
  __builtin_memcpy(&lanes.hi[q * kW], &hi, sizeof(hi));
  __builtin_memcpy(&lanes.lo[q * kW], &lo, sizeof(lo));
  for (int l = 0; l < kW; ++l) lane_add(lanes, q * kW + l, v[l]);
  LanePair out;
  __builtin_memcpy(&out.hi, &lanes.hi[q * kW], sizeof(out.hi));
  __builtin_memcpy(&out.lo, &lanes.lo[q * kW], sizeof(out.lo));
  return out;
}

// One element's square into one lane of `squares`, scalar: x*x into the high lanes and its exact
// low part fma(x, x, -x*x) into the low ones. A square that overflowed (+inf) or of a NaN or
// infinity adds only x*x, which counts as that special (the low part would be NaN or -inf).
inline __attribute__((always_inline)) void square_lane_add(SquareLanes& squares, int l, double v) {
  const double h = v * v;
  lane_add(squares.high, l, h);
  if (__builtin_isfinite(h)) lane_add(squares.low, l, __builtin_fma(v, v, -h));
}

// TwoSum of v into the expansion (hi, lo), both steps error-free unless e2 (lo's own error) is
// nonzero, NaN or infinite: then the caller takes the scalar path.
struct Added {
  vd hi, lo, e2;
};
inline __attribute__((always_inline)) Added two_sum_lanes(vd hi, vd lo, vd v) {
  const vd t = hi + v, bv = t - hi, e = (hi - (t - bv)) + (v - bv);
  const vd t2 = lo + e, be = t2 - lo, e2 = (lo - (t2 - be)) + (e - be);
  return Added{t, t2, e2};
}

// A register's two square expansions as the slow path leaves them.
struct SquarePairs {
  vd shi, slo, lhi, llo;
};

// Register q's squares one by one through square_lane_add, from `squares`' lanes as they were;
// returns them as it left them. Out of line and by value, as register_by_lanes.
[[gnu::noinline]] SquarePairs squares_by_lanes(SquareLanes& squares, int q, vd v, SquarePairs was) {
  __builtin_memcpy(&squares.high.hi[q * kW], &was.shi, sizeof(vd));
  __builtin_memcpy(&squares.high.lo[q * kW], &was.slo, sizeof(vd));
  __builtin_memcpy(&squares.low.hi[q * kW], &was.lhi, sizeof(vd));
  __builtin_memcpy(&squares.low.lo[q * kW], &was.llo, sizeof(vd));
  for (int k = 0; k < kW; ++k) square_lane_add(squares, q * kW + k, v[k]);
  SquarePairs out;
  __builtin_memcpy(&out.shi, &squares.high.hi[q * kW], sizeof(vd));
  __builtin_memcpy(&out.slo, &squares.high.lo[q * kW], sizeof(vd));
  __builtin_memcpy(&out.lhi, &squares.low.hi[q * kW], sizeof(vd));
  __builtin_memcpy(&out.llo, &squares.low.lo[q * kW], sizeof(vd));
  return out;
}

// The whole registers of a run with lo's addition left plain: per register min, max, TwoSum's
// first step, lo += e and the least nonzero magnitude as bits (an integer min of |v| - 1, which
// takes zero to the largest): four vector operations where lo's TwoSum and its test are eight.
// With Squares, each v's square split as h + l (h = v*v, l = fma(v, v, -h)) into its two
// expansions the same way. Afterwards lo_adds_exact proves every lo addition of every expansion
// exact, or the run is done again by the exact loop from the lanes as they were (left in `lanes`
// and `squares` until then). Returns whether `r` now holds the run's whole registers.
//
// The squares' bounds come from the elements': with |v| at least 2^e (e: the least nonzero
// magnitude's exponent) and at most `largest`, h is a multiple of 2^(2e - 52) (or of 2^-1074,
// every double's) and at most fl(largest^2); l, the exact rest v^2 - h, of 2^(2e - 104) (where
// that is below 2^-1074, the fma rounds l to a multiple of 2^-1074) and at most 2^-53 h + 2^-1074.
template <bool Squares, bool Identity, int kRegs>
inline __attribute__((always_inline)) bool optimistic_registers(const double* x, uint64_t step, uint64_t n,
                                                                double scale, double offset, ReduceLanes& lanes,
                                                                SquareLanes* squares, RunRegisters r) {
  constexpr uint64_t kAbs = ~(uint64_t{1} << 63);
  vd h[kRegs], l[kRegs], rmn[kRegs], rmx[kRegs], sh[kRegs], sl[kRegs], lh[kRegs], ll[kRegs];
  vu least[kRegs];
  for (int q = 0; q < kRegs; ++q) {
    h[q] = r.hi[q];
    l[q] = r.lo[q];
    rmn[q] = vd{} + __builtin_inf();
    rmx[q] = vd{} - __builtin_inf();
    least[q] = vu{} + ~uint64_t{0};
    if constexpr (Squares) {
      sh[q] = r.shi[q];
      sl[q] = r.slo[q];
      lh[q] = r.lhi[q];
      ll[q] = r.llo[q];
    }
  }
  uint64_t j = 0;
  for (; j + 8 <= n; j += 8) {
#pragma GCC unroll 4
    for (int q = 0; q < kRegs; ++q) {
      const vd v = run_register<Identity>(x, step, n, j, q, scale, offset);
      rmn[q] = v < rmn[q] ? v : rmn[q];
      rmx[q] = v > rmx[q] ? v : rmx[q];
      const vu magnitude = ((vu)v & kAbs) - 1;
      least[q] = magnitude < least[q] ? magnitude : least[q];
      add_plain(h[q], l[q], v);
      if constexpr (Squares) {
        const vd square = v * v;
        add_plain(sh[q], sl[q], square);
        add_plain(lh[q], ll[q], fma_lanes(v, v, -square));
      }
    }
  }
  double largest = 0;
  uint64_t least_bits = ~uint64_t{0};
  for (int q = 0; q < kRegs; ++q) {
    for (int k = 0; k < kW; ++k) {
      const double a = __builtin_fabs(rmn[q][k]), b = __builtin_fabs(rmx[q][k]);
      largest = a > largest ? a : largest;
      largest = b > largest ? b : largest;
      least_bits = least[q][k] < least_bits ? least[q][k] : least_bits;
    }
  }
  least_bits += 1;  // the least nonzero magnitude's bits; 0: every element was zero
  ElementQuanta quanta = element_quanta(least_bits);
  const uint64_t m = j / 8;
  double his[8], los[8];
  lanes_of<kRegs>(h, his);
  lanes_of<kRegs>(l, los);
  if (!lo_adds_exact(lanes, his, los, m, largest, quanta.sum)) return false;
  if constexpr (Squares) {
    const double largest_high = largest * largest;
    lanes_of<kRegs>(sh, his);
    lanes_of<kRegs>(sl, los);
    if (!lo_adds_exact(squares->high, his, los, m, largest_high, quanta.high)) return false;
    lanes_of<kRegs>(lh, his);
    lanes_of<kRegs>(ll, los);
    if (!lo_adds_exact(squares->low, his, los, m, largest_high * 0x1p-53 + 0x1p-1074, quanta.low)) return false;
    squares->high.quantum = quanta.high;
    squares->low.quantum = quanta.low;
  }
  lanes.quantum = quanta.sum;
  for (int q = 0; q < kRegs; ++q) {
    r.hi[q] = h[q];
    r.lo[q] = l[q];
    r.mn[q] = rmn[q] < r.mn[q] ? rmn[q] : r.mn[q];
    r.mx[q] = rmx[q] > r.mx[q] ? rmx[q] : r.mx[q];
    if constexpr (Squares) {
      r.shi[q] = sh[q];
      r.slo[q] = sl[q];
      r.lhi[q] = lh[q];
      r.llo[q] = ll[q];
    }
  }
  return true;
}

// The eight lanes of ReduceLanes live in 8 / kW registers; element j goes to lane j % 8. Per
// register both TwoSums run on the elements as they are, and one test of e2 (lo's own error) finds
// the rare register that needs the scalar path: a nonzero e2 is something to spill, and a NaN,
// an infinity or an overflow anywhere in the two TwoSums leaves e2 NaN or infinite. That register's
// lanes are then put back as they were and its elements added by lane_add, which spills what it
// must; so the common case costs no test of its own for specials. With Squares, the same pass adds
// each element's square, split exactly by an fma, into `squares` (the high part into its own
// expansion, the low part into another), with the same test and fallback of its own.
//
// Identity (scale 1, offset +0.0, the stored arrays' usual job): the elements go in as loaded, two
// vector operations a register fewer. x * 1 + 0 is x but for -0.0, which becomes +0.0; a zero
// reaches the sums as either and the lanes' min and max are made +0.0 at the end, so the result
// has the same bits.
template <bool Squares, bool Identity>
inline __attribute__((always_inline)) void reduce_run(const double* x, uint64_t step, uint64_t n, double scale,
                                                      double offset, ReduceLanes& lanes, SquareLanes* squares) {
  constexpr int kRegs = 8 / kW;
  constexpr uint64_t kAbs = ~(uint64_t{1} << 63);
  vd hi[kRegs], lo[kRegs], mn[kRegs], mx[kRegs], shi[kRegs], slo[kRegs], lhi[kRegs], llo[kRegs];
  __builtin_memcpy(hi, lanes.hi, sizeof(hi));
  __builtin_memcpy(lo, lanes.lo, sizeof(lo));
  __builtin_memcpy(mn, lanes.min, sizeof(mn));
  __builtin_memcpy(mx, lanes.max, sizeof(mx));
  if constexpr (Squares) {
    __builtin_memcpy(shi, squares->high.hi, sizeof(shi));
    __builtin_memcpy(slo, squares->high.lo, sizeof(slo));
    __builtin_memcpy(lhi, squares->low.hi, sizeof(lhi));
    __builtin_memcpy(llo, squares->low.lo, sizeof(llo));
  }
  uint64_t j = 0;
  if (n >= kOptimisticLeast) {
    if (lanes.optimism_rest > 0) {
      --lanes.optimism_rest;
    } else if (const RunRegisters r{hi, lo, mn, mx, shi, slo, lhi, llo};
               optimistic_registers<Squares, Identity, kRegs>(x, step, n, scale, offset, lanes, squares, r)) {
      j = n / 8 * 8;
      ++lanes.optimistic_runs;
    } else {
      lanes.optimism_rest = kOptimismRest;
    }
  }
  if (j + 8 <= n) {  // the exact way: what the lanes are multiples of is no longer known
    lanes.quantum = kQuantumUnknown;
    if constexpr (Squares) squares->high.quantum = squares->low.quantum = kQuantumUnknown;
  }
  for (; j + 8 <= n; j += 8) {
#pragma GCC unroll 4
    for (int q = 0; q < kRegs; ++q) {
      const vd v = run_register<Identity>(x, step, n, j, q, scale, offset);
      mn[q] = v < mn[q] ? v : mn[q];
      mx[q] = v > mx[q] ? v : mx[q];
      const Added a = two_sum_lanes(hi[q], lo[q], v);
      if (__builtin_expect(any_set((vu)a.e2 & kAbs), 0)) {
        const LanePair slow = register_by_lanes(lanes, q, v, hi[q], lo[q]);
        hi[q] = slow.hi;
        lo[q] = slow.lo;
      } else {
        hi[q] = a.hi;
        lo[q] = a.lo;
      }
      if constexpr (Squares) {
        const vd h = v * v, l = fma_lanes(v, v, -h);
        const Added sh = two_sum_lanes(shi[q], slo[q], h);
        const Added sl = two_sum_lanes(lhi[q], llo[q], l);
        if (__builtin_expect(any_set(((vu)sh.e2 | (vu)sl.e2) & kAbs), 0)) {
          const SquarePairs slow = squares_by_lanes(*squares, q, v, SquarePairs{shi[q], slo[q], lhi[q], llo[q]});
          shi[q] = slow.shi;
          slo[q] = slow.slo;
          lhi[q] = slow.lhi;
          llo[q] = slow.llo;
        } else {
          shi[q] = sh.hi;
          slo[q] = sh.lo;
          lhi[q] = sl.hi;
          llo[q] = sl.lo;
        }
      }
    }
  }
  __builtin_memcpy(lanes.hi, hi, sizeof(hi));
  __builtin_memcpy(lanes.lo, lo, sizeof(lo));
  __builtin_memcpy(lanes.min, mn, sizeof(mn));
  __builtin_memcpy(lanes.max, mx, sizeof(mx));
  if constexpr (Squares) {
    __builtin_memcpy(squares->high.hi, shi, sizeof(shi));
    __builtin_memcpy(squares->high.lo, slo, sizeof(slo));
    __builtin_memcpy(squares->low.hi, lhi, sizeof(lhi));
    __builtin_memcpy(squares->low.lo, llo, sizeof(llo));
  }
  // The tail, one element at a time. lane_add keeps each lane a multiple of what it and the
  // element were (or empties it): the lanes' quantum takes the elements' in.
  uint64_t least = ~uint64_t{0};
  for (int l = 0; j < n; ++j, ++l) {
    const double v = Identity ? x[j * step] : x[j * step] * scale + offset;
    lane_add(lanes, l, v);
    if constexpr (Squares) square_lane_add(*squares, l, v);
    uint64_t bits;
    __builtin_memcpy(&bits, &v, sizeof(bits));
    bits = (bits & kAbs) - 1;
    least = bits < least ? bits : least;
  }
  const ElementQuanta tail = element_quanta(least + 1);
  lanes.quantum = tail.sum < lanes.quantum ? tail.sum : lanes.quantum;
  if constexpr (Squares) {
    squares->high.quantum = tail.high < squares->high.quantum ? tail.high : squares->high.quantum;
    squares->low.quantum = tail.low < squares->low.quantum ? tail.low : squares->low.quantum;
  }
  if constexpr (Identity) {
    for (int l = 0; l < 8; ++l) {
      if (lanes.min[l] == 0) lanes.min[l] = 0.0;
      if (lanes.max[l] == 0) lanes.max[l] = 0.0;
    }
  }
}

// scale * x + offset is x itself (its -0.0 aside): scale 1 and offset +0.0, bit for bit.
inline bool is_identity(double scale, double offset) {
  uint64_t bits;
  __builtin_memcpy(&bits, &offset, sizeof(bits));
  return scale == 1.0 && bits == 0;
}

// A run in runs of at most kOptimisticBlock elements.
template <bool Squares, bool Identity>
void reduce_blocks(const double* x, uint64_t step, uint64_t n, double scale, double offset, ReduceLanes& lanes,
                   SquareLanes* squares) {
  for (uint64_t done = 0; done < n; done += kOptimisticBlock) {
    const uint64_t count = n - done < kOptimisticBlock ? n - done : kOptimisticBlock;
    reduce_run<Squares, Identity>(x + done * step, step, count, scale, offset, lanes, squares);
  }
}

void reduce(const double* x, uint64_t step, uint64_t n, double scale, double offset, ReduceLanes& lanes) {
  if (is_identity(scale, offset)) reduce_blocks<false, true>(x, step, n, scale, offset, lanes, nullptr);
  else reduce_blocks<false, false>(x, step, n, scale, offset, lanes, nullptr);
}

void reduce_squares(const double* x, uint64_t step, uint64_t n, double scale, double offset,
                    ReduceLanes& lanes, SquareLanes& squares) {
  if (is_identity(scale, offset)) reduce_blocks<true, true>(x, step, n, scale, offset, lanes, &squares);
  else reduce_blocks<true, false>(x, step, n, scale, offset, lanes, &squares);
}

}  // namespace
}  // namespace psched
