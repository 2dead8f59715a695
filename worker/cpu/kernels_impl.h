// The body of the CPU kernels (kernels.h), included once by each of kernels_baseline.cpp,
// kernels_avx2.cpp and kernels_avx512.cpp, which are compiled with different -m flags. Everything
// here has internal linkage (anonymous namespace, no std:: templates, no inline functions of other
// headers): code compiled for AVX-512 must never be what the linker picks for a baseline caller.
//
// GCC vector types one register wide (8, 4 or 2 doubles); the few operations they lack
// (32x32->64-bit multiply, sqrt, fma, table gathers, lane shuffles) come from intrinsics per
// instruction set. A multiply and an add are fused only where the element definition says fma
// (the project builds with -ffp-contract=off), and an fma rounds once on every build (the FMA
// instruction on AVX2 and AVX-512, libm's fma() per lane on the baseline build), so every build
// rounds identically.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>

#include "core/element_math.h"
#include "worker/cpu/kernels.h"

namespace psched {
namespace {

// Lanes per register: 8 (AVX-512), 4 (AVX2) or 2 (SSE2). Only the width differs between builds;
// every element goes through the same operations.
#if defined(__AVX512F__)
constexpr int kW = 8;
#elif defined(__AVX2__)
constexpr int kW = 4;
#else
constexpr int kW = 2;
#endif
typedef double vd __attribute__((vector_size(8 * kW)));
typedef uint64_t vu __attribute__((vector_size(8 * kW)));
typedef int64_t vi __attribute__((vector_size(8 * kW)));
typedef float vf __attribute__((vector_size(4 * kW)));

constexpr uint64_t kLow32 = 0xffffffffu;

// Per lane: (a mod 2^32) * m as a full 64-bit product.
inline __attribute__((always_inline)) vu mul_lo32(vu a, uint32_t m) {
#if defined(__AVX512F__)
  // The maskz forms: GCC 12's plain ones trip -Wmaybe-uninitialized in avx512fintrin.h.
  return (vu)_mm512_maskz_mul_epu32(0xff, (__m512i)a, (__m512i)(vu{} + m));
#elif defined(__AVX2__)
  return (vu)_mm256_mul_epu32((__m256i)a, (__m256i)(vu{} + m));
#elif defined(__SSE2__)
  return (vu)_mm_mul_epu32((__m128i)a, (__m128i)(vu{} + m));
#else
  return (a & kLow32) * uint64_t(m);  // other architectures: the compiler's own widening multiply
#endif
}

// Per lane: the high half of a product in the low half (the upper half is left as garbage that
// mul_lo32 ignores). On AVX-512 a shuffle (port 5) rather than a shift (port 0, where the
// multiplies already queue); narrower builds have two ports for shifts.
inline __attribute__((always_inline)) vu high_half(vu a) {
#if defined(__AVX512F__)
  return (vu)_mm512_maskz_shuffle_epi32(0xffff, (__m512i)a, _MM_PERM_CDAB);
#else
  return a >> 32;
#endif
}

// IEEE square root per lane (correctly rounded, as sqrt()).
inline __attribute__((always_inline)) vd sqrt_lanes(vd x) {
#if defined(__AVX512F__)
  return (vd)_mm512_maskz_sqrt_pd(0xff, (__m512d)x);
#elif defined(__AVX2__)
  return (vd)_mm256_sqrt_pd((__m256d)x);
#elif defined(__SSE2__)
  return (vd)_mm_sqrt_pd((__m128d)x);
#else
  for (int l = 0; l < kW; ++l) x[l] = __builtin_sqrt(x[l]);
  return x;
#endif
}

// a * b + c per lane, rounded once.
inline __attribute__((always_inline)) vd fma_lanes(vd a, vd b, vd c) {
#if defined(__AVX512F__)
  return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif defined(__AVX2__) && defined(__FMA__)
  return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#else
  for (int l = 0; l < kW; ++l) a[l] = __builtin_fma(a[l], b[l], c[l]);
  return a;
#endif
}

// Per lane: the double at base[2 i] (i below 2^31), for a table of pairs.
inline __attribute__((always_inline)) vd gather_pairs(const double* base, vu i) {
#if defined(__AVX512F__)
  return (vd)_mm512_mask_i64gather_pd(_mm512_setzero_pd(), 0xff, (__m512i)(i + i), base, 8);
#elif defined(__AVX2__)
  return (vd)_mm256_i64gather_pd(base, (__m256i)(i + i), 8);
#else
  vd v;
  for (int l = 0; l < kW; ++l) v[l] = base[2 * i[l]];
  return v;
#endif
}

// Stores one register at p: non-temporal when streaming and p is aligned to the register width.
inline __attribute__((always_inline)) void store_lanes(double* p, vd v, bool streaming) {
#if defined(__AVX512F__)
  if (streaming && (reinterpret_cast<uintptr_t>(p) & 63) == 0) return _mm512_stream_pd(p, (__m512d)v);
#elif defined(__AVX__)
  if (streaming && (reinterpret_cast<uintptr_t>(p) & 31) == 0) return _mm256_stream_pd(p, (__m256d)v);
#elif defined(__SSE2__)
  if (streaming && (reinterpret_cast<uintptr_t>(p) & 15) == 0) return _mm_stream_pd(p, (__m128d)v);
#endif
  (void)streaming;
  __builtin_memcpy(p, &v, sizeof(v));
}

// Per lane: a where mask is all ones, b where it is zero.
inline __attribute__((always_inline)) vd select_bits(vu mask, vd a, vd b) {
  return (vd)(((vu)a & mask) | ((vu)b & ~mask));
}

// Philox4x32-10 round keys for one seed: key k0 + r * W0, k1 + r * W1 before round r.
struct PhiloxKeys {
  uint32_t k0[10], k1[10];
};

PhiloxKeys philox_keys(uint64_t seed) {
  PhiloxKeys k;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    k.k0[r] = k0;
    k.k1[r] = k1;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return k;
}

// The two 53-bit integers of philox4x32_10(index, index >> 32, 0, 0, key) that uniform_pair()
// scales by 2^-53: a from words 0 and 1, b from words 2 and 3. Lanes hold 32-bit words in 64-bit
// slots; upper halves may carry garbage until the final masks (mul_lo32 ignores them).
inline __attribute__((always_inline)) void philox_pair(vu index, const PhiloxKeys& k, vu& a,
                                                       vu& b) {
  constexpr uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1;
  // Round 0 with c2 = c3 = 0: the second product is zero.
  const vu p00 = mul_lo32(index, kM0);
  vu c0 = (index >> 32) ^ k.k0[0];
  vu c1 = vu{} + 0;
  vu c2 = high_half(p00) ^ k.k1[0];
  vu c3 = p00;
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
    const vu p0 = mul_lo32(c0, kM0);
    const vu p1 = mul_lo32(c2, kM1);
    c0 = high_half(p1) ^ c1 ^ k.k0[r];
    c1 = p1;
    c2 = high_half(p0) ^ c3 ^ k.k1[r];
    c3 = p0;
  }
  a = ((c0 << 32) | (c1 & kLow32)) >> 11;
  b = ((c2 << 32) | (c3 & kLow32)) >> 11;
}

// Exact double of a per-lane integer below 2^64, correctly rounded (as double(uint64_t)): both
// 32-bit halves convert exactly through the 2^52 exponent trick, and one rounded add joins them.
inline __attribute__((always_inline)) vd to_double(vu x) {
#if defined(__AVX512DQ__)
  return __builtin_convertvector(x, vd);  // vcvtuqq2pd: the same correctly rounded result
#endif
  constexpr uint64_t kTwo52Bits = 0x4330000000000000u;
  constexpr double kTwo52 = 4503599627370496.0;
  const vd hi = (vd)((x >> 32) | kTwo52Bits) - kTwo52;
  const vd lo = (vd)((x & kLow32) | kTwo52Bits) - kTwo52;
  return hi * 4294967296.0 + lo;
}

// The arithmetic of element_math.h (log, sin, cos of the normal generator) on one register of
// lanes. A type local to this file, so the functions instantiated with it stay internal too.
struct VecOps {
  using Real = vd;
  using Bits = vu;
  static inline __attribute__((always_inline)) Bits bits(Real x) { return (vu)x; }
  static inline __attribute__((always_inline)) Real real(Bits b) { return (vd)b; }
  static inline __attribute__((always_inline)) Real splat(double x) { return vd{} + x; }
  static inline __attribute__((always_inline)) Real fma(Real a, Real b, Real c) { return fma_lanes(a, b, c); }
  static inline __attribute__((always_inline)) Real sqrt(Real x) { return sqrt_lanes(x); }
  static inline __attribute__((always_inline)) element_math::LogEntry<Real> log_entry(Bits i) {
    return {gather_pairs(&element_math::kLogTable[0].invc, i),
            gather_pairs(&element_math::kLogTable[0].logc, i)};
  }
};

// kW elements (index, index + stride, ...) of generator g per call.
struct Source {
  PhiloxKeys keys;
  double scale, offset;  // normal: std, mean; uniform: high - low, low; arange: step, start
};

// normal(mean, std)'s element from its standard normal z: mean + std z rounded once, as
// scale_normal() (core/generators.h).
inline __attribute__((always_inline)) vd scale_normal_lanes(const Source& src, vd z) {
  return fma_lanes(vd{} + src.scale, z, vd{} + src.offset);
}

inline __attribute__((always_inline)) vd uniform_lanes(const Source& src, vu index) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  vu a, b;
  philox_pair(index, src.keys, a, b);
  return src.scale * (to_double(a) * kTwoPowMinus53) + src.offset;
}

inline __attribute__((always_inline)) vd arange_lanes(const Source& src, vu index) {
  return src.scale * to_double(index) + src.offset;
}

inline __attribute__((always_inline)) vd constant_lanes(const Source& src, vu) {
  return vd{} + src.offset;
}

inline __attribute__((always_inline)) vd as_stored(vd v, bool to_float) {
  return to_float ? __builtin_convertvector(__builtin_convertvector(v, vf), vd) : v;
}

template <vd (*Element)(const Source&, vu)>
void generate_with(const Source& src, bool to_float, uint64_t first, uint64_t stride, uint64_t n,
                   double* out, bool streaming) {
  vu index;
  for (int l = 0; l < kW; ++l) index[l] = first + uint64_t(l) * stride;
  const uint64_t step = kW * stride;
  uint64_t i = 0;
  for (; i + kW <= n; i += kW) {
    store_lanes(out + i, as_stored(Element(src, index), to_float), streaming);
    index += step;
  }
  if (i < n) {
    const vd v = as_stored(Element(src, index), to_float);
    for (uint64_t j = 0; i + j < n; ++j) out[i + j] = v[j];
  }
}

// normal (core/generators.h): elements 2m and 2m + 1 share Philox block m and its radius, and
// take r cos(2 pi u1) and r sin(2 pi u1), with element_math.h's operations, so the same bits as
// box_muller(). Computed in stages over kNormalVecs registers of blocks: Philox, then the radius
// (log and sqrt), then sin and cos, then the scaling. Each stage's iterations are
// independent and short, so the core overlaps many of them; one element's whole chain (~250
// cycles of latency) run end to end lets it overlap two.
constexpr int kNormalVecs = 16;
constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;

// Lanes l < kW of a and b interleaved: a0 b0 a1 b1 ..., as two registers.
inline __attribute__((always_inline)) void interleave(vd a, vd b, vd& lo, vd& hi) {
#if defined(__AVX512F__)
  lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
  hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
#elif defined(__AVX2__)
  lo = __builtin_shufflevector(a, b, 0, 4, 1, 5);
  hi = __builtin_shufflevector(a, b, 2, 6, 3, 7);
#else
  lo = __builtin_shufflevector(a, b, 0, 2);
  hi = __builtin_shufflevector(a, b, 1, 3);
#endif
}

// Elements first, first + 1, ...: each block computed once for its two elements. first is even.
void normal_pairs(const Source& src, bool to_float, uint64_t first, uint64_t n, double* out,
                  bool streaming) {
  vd radius[kNormalVecs], u1[kNormalVecs], sines[kNormalVecs];
  vu block;
  for (int l = 0; l < kW; ++l) block[l] = first / 2 + uint64_t(l);
  constexpr uint64_t kPerStage = 2 * kNormalVecs * kW;  // elements
  for (uint64_t i = 0; i < n; i += kPerStage) {
    const uint64_t left = n - i < kPerStage ? n - i : kPerStage;
    const int vecs = int((left + 2 * kW - 1) / (2 * kW));
    for (int v = 0; v < vecs; ++v) {
      vu a, b;
      philox_pair(block, src.keys, a, b);
      radius[v] = to_double(a) * kTwoPowMinus53;
      u1[v] = to_double(b) * kTwoPowMinus53;
      block += kW;
    }
    for (int v = 0; v < vecs; ++v) radius[v] = element_math::box_muller_radius<VecOps>(radius[v]);
    for (int v = 0; v < vecs; ++v) {
      const element_math::SinCos<vd> angle = element_math::sincos_2pi<VecOps>(u1[v]);
      sines[v] = angle.sin;
      u1[v] = angle.cos;
    }
    for (int v = 0; v < vecs; ++v) {
      const vd even = as_stored(scale_normal_lanes(src, radius[v] * u1[v]), to_float);
      const vd odd = as_stored(scale_normal_lanes(src, radius[v] * sines[v]), to_float);
      vd lo, hi;
      interleave(even, odd, lo, hi);
      const uint64_t at = i + uint64_t(v) * 2 * kW;
      if (at + 2 * kW <= n) {
        store_lanes(out + at, lo, streaming);
        store_lanes(out + at + kW, hi, streaming);
      } else {
        for (uint64_t j = 0; at + j < n; ++j) out[at + j] = j < kW ? lo[j] : hi[j - kW];
      }
    }
  }
}

// Any stride (the fused path's selected columns): each lane finds its own block and branch.
void normal_strided(const Source& src, bool to_float, uint64_t first, uint64_t stride, uint64_t n,
                    double* out) {
  vd radius[kNormalVecs], u1[kNormalVecs], sines[kNormalVecs];
  vu index;
  for (int l = 0; l < kW; ++l) index[l] = first + uint64_t(l) * stride;
  const uint64_t step = kW * stride;
  for (uint64_t i = 0; i < n; i += kNormalVecs * kW) {
    const uint64_t left = n - i;
    const int vecs = left >= kNormalVecs * kW ? kNormalVecs : int((left + kW - 1) / kW);
    vu odd[kNormalVecs];
    for (int v = 0; v < vecs; ++v) {
      vu a, b;
      philox_pair(index >> 1, src.keys, a, b);
      radius[v] = to_double(a) * kTwoPowMinus53;
      u1[v] = to_double(b) * kTwoPowMinus53;
      odd[v] = vu{} - (index & 1);
      index += step;
    }
    for (int v = 0; v < vecs; ++v) radius[v] = element_math::box_muller_radius<VecOps>(radius[v]);
    for (int v = 0; v < vecs; ++v) {
      const element_math::SinCos<vd> angle = element_math::sincos_2pi<VecOps>(u1[v]);
      sines[v] = angle.sin;
      u1[v] = angle.cos;
    }
    for (int v = 0; v < vecs; ++v) {
      const vd z = radius[v] * select_bits(odd[v], sines[v], u1[v]);
      const vd x = as_stored(scale_normal_lanes(src, z), to_float);
      const uint64_t at = i + uint64_t(v) * kW;
      if (at + kW <= n) {
        __builtin_memcpy(out + at, &x, sizeof(x));
      } else {
        for (uint64_t j = 0; at + j < n; ++j) out[at + j] = x[j];
      }
    }
  }
}

void generate_normal(const Source& src, bool to_float, uint64_t first, uint64_t stride,
                     uint64_t n, double* out, bool streaming) {
  if (stride != 1 || n < 2 * kW) {
    normal_strided(src, to_float, first, stride, n, out);
    return;
  }
  if (first & 1) {  // an odd first element shares its block with the one before the run
    normal_strided(src, to_float, first, 1, 1, out);
    ++first;
    ++out;
    --n;
  }
  normal_pairs(src, to_float, first, n, out, streaming);
}

void generate(const GeneratorParams& g, bool to_float, uint64_t first, uint64_t stride, uint64_t n,
              double* out, bool streaming) {
  Source src{philox_keys(g.seed), g.param1, g.param0};
  switch (g.kind) {
    case Generator::kNormal:
      generate_normal(src, to_float, first, stride, n, out, streaming);
      break;
    case Generator::kUniform:
      src.scale = g.param1 - g.param0;
      generate_with<uniform_lanes>(src, to_float, first, stride, n, out, streaming);
      break;
    case Generator::kArange:
      generate_with<arange_lanes>(src, to_float, first, stride, n, out, streaming);
      break;
    case Generator::kConstant:
    default:
      generate_with<constant_lanes>(src, to_float, first, stride, n, out, streaming);
      break;
  }
}

// The normal generator's pair arithmetic on given uniforms, kW pairs at a time (kernels.h).
void box_muller_pairs(const double* u0, const double* u1, uint64_t n, double* even, double* odd) {
  for (uint64_t i = 0; i < n; i += kW) {
    vd a{}, b{};
    for (uint64_t l = 0; l < kW && i + l < n; ++l) {
      a[l] = u0[i + l];
      b[l] = u1[i + l];
    }
    const vd radius = element_math::box_muller_radius<VecOps>(a);
    const element_math::SinCos<vd> angle = element_math::sincos_2pi<VecOps>(b);
    const vd c = radius * angle.cos, s = radius * angle.sin;
    for (uint64_t l = 0; l < kW && i + l < n; ++l) {
      even[i + l] = c[l];
      odd[i + l] = s[l];
    }
  }
}

// On the scalar path, magnitudes from here up (and NaN, infinities) bypass the lanes into the exact
// accumulator: a lane of at most 2^31 smaller ones stays below 2^991, so neither hi nor lo can
// overflow and TwoSum stays error-free. (The vector path lets a large value in while nothing
// overflows; an overflow shows in e2 and sends the register here.)
constexpr double kLaneLimit = 0x1p960;

// Any lane nonzero (all bits compared: -0.0 counts as nonzero, which only costs a rare spill).
inline __attribute__((always_inline)) bool any_set(vu m) {
#if defined(__AVX512F__)
  return _mm512_test_epi64_mask((__m512i)m, (__m512i)m) != 0;
#elif defined(__AVX2__)
  return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#else
  bool any = false;
  for (int l = 0; l < kW; ++l) any |= m[l] != 0;
  return any;
#endif
}

// Lanes 0, 2, 4, ... of a then of b: the even elements of 2 kW consecutive ones.
inline __attribute__((always_inline)) vd even_lanes(vd a, vd b) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(a, b, 0, 2, 4, 6, 8, 10, 12, 14);
#elif defined(__AVX2__)
  return __builtin_shufflevector(a, b, 0, 2, 4, 6);
#else
  return __builtin_shufflevector(a, b, 0, 2);
#endif
}

// One element into one lane, scalar: the tail of a run, and a register that needs spills.
inline __attribute__((always_inline)) void lane_add(ReduceLanes& lanes, int l, double v) {
  lanes.min[l] = v < lanes.min[l] ? v : lanes.min[l];
  lanes.max[l] = v > lanes.max[l] ? v : lanes.max[l];
  if (!(__builtin_fabs(v) < kLaneLimit)) return lanes_spill(lanes, v);
  // TwoSum (Knuth): hi + v = t + e exactly; then lo + e = t2 + e2 exactly.
  const double hi = lanes.hi[l], t = hi + v, bv = t - hi, e = (hi - (t - bv)) + (v - bv);
  const double lo = lanes.lo[l], t2 = lo + e, be = t2 - lo, e2 = (lo - (t2 - be)) + (e - be);
  lanes.hi[l] = t;
  lanes.lo[l] = t2;
  if (e2 != 0) lanes_spill(lanes, e2);
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
    v = even_lanes(a, b);
  } else {
    for (int l = 0; l < kW; ++l) v[l] = p[uint64_t(l) * step];
  }
  return v;
}

// Register q's elements v one by one through lane_add, from the lanes as they were (hi, lo), which
// then take what lane_add left. Lane by lane, never through the registers' addresses, so that the
// caller's registers stay registers.
inline __attribute__((always_inline)) void register_by_lanes(ReduceLanes& lanes, int q, vd v, vd& hi,
                                                             vd& lo) {
  for (int l = 0; l < kW; ++l) {
    lanes.hi[q * kW + l] = hi[l];
    lanes.lo[q * kW + l] = lo[l];
    lane_add(lanes, q * kW + l, v[l]);
    hi[l] = lanes.hi[q * kW + l];
    lo[l] = lanes.lo[q * kW + l];
  }
}

// The eight lanes of ReduceLanes live in 8 / kW registers; element j goes to lane j % 8. Per
// register both TwoSums run on the elements as they are, and one test of e2 (lo's own error) finds
// the rare register that needs the scalar path: a nonzero e2 is something to spill, and a NaN,
// an infinity or an overflow anywhere in the two TwoSums leaves e2 NaN or infinite. That register's
// lanes are then put back as they were and its elements added by lane_add, which spills what it
// must; so the common case costs no test of its own for specials.
void reduce(const double* x, uint64_t step, uint64_t n, double scale, double offset,
            ReduceLanes& lanes) {
  constexpr int kRegs = 8 / kW;
  constexpr uint64_t kAbs = ~(uint64_t{1} << 63);
  vd hi[kRegs], lo[kRegs], mn[kRegs], mx[kRegs];
  __builtin_memcpy(hi, lanes.hi, sizeof(hi));
  __builtin_memcpy(lo, lanes.lo, sizeof(lo));
  __builtin_memcpy(mn, lanes.min, sizeof(mn));
  __builtin_memcpy(mx, lanes.max, sizeof(mx));
  uint64_t j = 0;
  for (; j + 8 <= n; j += 8) {
#pragma GCC unroll 4
    for (int q = 0; q < kRegs; ++q) {
      const double* p = x + (j + uint64_t(q) * kW) * step;
      const vd v = load_register(p, step, j + uint64_t(q + 1) * kW < n) * scale + offset;
      mn[q] = v < mn[q] ? v : mn[q];
      mx[q] = v > mx[q] ? v : mx[q];
      const vd t = hi[q] + v, bv = t - hi[q], e = (hi[q] - (t - bv)) + (v - bv);
      const vd t2 = lo[q] + e, be = t2 - lo[q], e2 = (lo[q] - (t2 - be)) + (e - be);
      if (__builtin_expect(any_set((vu)e2 & kAbs), 0)) {
        register_by_lanes(lanes, q, v, hi[q], lo[q]);
      } else {
        hi[q] = t;
        lo[q] = t2;
      }
    }
  }
  __builtin_memcpy(lanes.hi, hi, sizeof(hi));
  __builtin_memcpy(lanes.lo, lo, sizeof(lo));
  __builtin_memcpy(lanes.min, mn, sizeof(mn));
  __builtin_memcpy(lanes.max, mx, sizeof(mx));
  for (int l = 0; j < n; ++j, ++l) lane_add(lanes, l, x[j * step] * scale + offset);
}

}  // namespace
}  // namespace psched
