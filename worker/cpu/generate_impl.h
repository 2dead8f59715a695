// Generating a run of array elements on registers of lanes (kernels.h's `generate`, and
// `box_muller_pairs` for the tests): Philox, the element math of core/element_math.h, and the
// generators' element definitions, bit for bit those of element_value(). Part of the CPU kernels'
// body (kernels_impl.h): internal linkage only.
#pragma once

#include <cstdint>

#include "core/element_math.h"
#include "worker/cpu/kernels.h"
#include "worker/cpu/lanes_impl.h"

namespace psched {
namespace {

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
  for (int r = 1; r < kPhiloxRounds; ++r) {
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
  static constexpr const element_math::Constants& constants() { return element_math::kConstants; }
  static inline __attribute__((always_inline)) Real select_odd(Bits q, Real a, Real b) {
    const Bits odd = ~((q & 1u) - 1u);  // all ones in the lanes where q is odd
    return real((bits(a) & odd) | (bits(b) & ~odd));
  }
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

}  // namespace
}  // namespace psched
