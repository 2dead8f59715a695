// Generating a run of array elements on registers of lanes (kernels.h's `generate`, and
// `ziggurat_words` for the tests): Philox, the normal's ziggurat fast path, and the generators'
// element definitions, bit for bit those of element_value(). Part of the CPU kernels' body
// (kernels_impl.h): internal linkage only.
#pragma once

#include <cstdint>

#include "core/element_math.h"
#include "worker/cpu/kernels.h"
#include "worker/cpu/lanes_impl.h"

namespace psched {
namespace {

// The two 64-bit words of philox4x32_10(index, index >> 32, 0, 0, key): w0 from words 0 and 1, w1
// from words 2 and 3. Lanes hold 32-bit words in 64-bit slots; upper halves may carry garbage until
// the final masks (mul_lo32 ignores them).
inline __attribute__((always_inline)) void philox_words(vu index, const PhiloxKeys& k, vu& w0, vu& w1) {
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
  w0 = (c0 << 32) | (c1 & kLow32);
  w1 = (c2 << 32) | (c3 & kLow32);
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

// kW elements (index, index + stride, ...) of generator g per call.
struct Source {
  PhiloxKeys keys;
  double scale, offset;  // normal: std, mean; uniform: high - low, low; arange: step, start
  uint64_t seed;         // the normal's slow path draws by seed (ziggurat_slow)
};

// normal(mean, std)'s element from its standard normal z: mean + std z rounded once, as
// scale_normal() (core/generators.h).
inline __attribute__((always_inline)) vd scale_normal_lanes(const Source& src, vd z) {
  return fma_lanes(vd{} + src.scale, z, vd{} + src.offset);
}

inline __attribute__((always_inline)) vd uniform_lanes(const Source& src, vu index) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  vu a, b;
  philox_words(index, src.keys, a, b);
  return src.scale * (to_double(a >> 11) * kTwoPowMinus53) + src.offset;
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

// The host's scalar arithmetic as a type of this translation unit: ziggurat_slow_as<SlowOps> is
// this ISA build's own copy, with its own FMA instruction (core/generators.h says why).
struct SlowOps : element_math::HostOps {
  static inline Real fma(Real a, Real b, Real c) { return __builtin_fma(a, b, c); }
};

// The ziggurat's fast path (ziggurat_fast, core/generators.h) in lanes: two gathers from the layer
// table, a conversion, a multiply, a compare. z gets +-x; slow gets all ones in the lanes whose
// element needs the slow path (about 0.7 % of them).
inline __attribute__((always_inline)) vd ziggurat_fast_lanes(vu w, vu& slow) {
  const vu layer = w & 0xffu;
  const vd j = to_double(w >> kNormalJShift);  // exact: below 2^53
  const vd k = gather_pairs(&element_math::kZigguratFast[0].k, layer);
  const vd x = j * gather_pairs(&element_math::kZigguratFast[0].w, layer);
  slow = (vu)(j >= k);
  return (vd)((vu)x ^ ((w & kNormalSignBit) << 55));
}

inline __attribute__((always_inline)) bool any_lane(vu mask) {
  uint64_t any = 0;
  for (int l = 0; l < kW; ++l) any |= mask[l];
  return any != 0;
}

// z with the scalar slow path's element in each lane that slow marks (element index[l], word w[l]).
inline void finish_slow_lanes(const Source& src, vu index, vu w, vu slow, vd& z) {
  for (int l = 0; l < kW; ++l) {
    if (slow[l] != 0) z[l] = ziggurat_slow_as<SlowOps>(src.seed, index[l], w[l]);
  }
}

// The normal's standard normals of words w, element index's (ziggurat(), core/generators.h): the
// fast path in lanes, then the scalar slow path for the lanes it leaves.
inline __attribute__((always_inline)) vd ziggurat_lanes(const Source& src, vu index, vu w) {
  vu slow;
  vd z = ziggurat_fast_lanes(w, slow);
  if (__builtin_expect(any_lane(slow), 0)) finish_slow_lanes(src, index, w, slow, z);
  return z;
}

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

// normal (core/generators.h): elements 2m and 2m + 1 take words 0-1 and 2-3 of Philox block m.
// Elements first, first + 1, ...: each block computed once for its two elements. first is even.
// In stages over kNormalVecs registers of blocks (Philox, then the fast path, then the stores), so
// that the core overlaps many blocks' chains; the lanes the fast path leaves (rare) take the
// scalar slow path between the fast path and the stores.
constexpr int kNormalVecs = 16;

void normal_pairs(const Source& src, bool to_float, uint64_t first, uint64_t n, double* out, bool streaming) {
  vu block;
  for (int l = 0; l < kW; ++l) block[l] = first / 2 + uint64_t(l);
  constexpr uint64_t kPerStage = 2 * kNormalVecs * kW;  // elements
  for (uint64_t i = 0; i < n; i += kPerStage) {
    const uint64_t left = n - i < kPerStage ? n - i : kPerStage;
    const int vecs = int((left + 2 * kW - 1) / (2 * kW));
    vu w0[kNormalVecs], w1[kNormalVecs], slow0[kNormalVecs], slow1[kNormalVecs];
    vd z0[kNormalVecs], z1[kNormalVecs];
    for (int v = 0; v < vecs; ++v) philox_words(block + uint64_t(v) * kW, src.keys, w0[v], w1[v]);
    vu any{};
    for (int v = 0; v < vecs; ++v) {
      z0[v] = ziggurat_fast_lanes(w0[v], slow0[v]);
      z1[v] = ziggurat_fast_lanes(w1[v], slow1[v]);
      any |= slow0[v] | slow1[v];
    }
    if (__builtin_expect(any_lane(any), 0)) {
      for (int v = 0; v < vecs; ++v) {
        const vu even = 2 * (block + uint64_t(v) * kW);
        finish_slow_lanes(src, even, w0[v], slow0[v], z0[v]);
        finish_slow_lanes(src, even + 1, w1[v], slow1[v], z1[v]);
      }
    }
    for (int v = 0; v < vecs; ++v) {
      const vd even = as_stored(scale_normal_lanes(src, z0[v]), to_float);
      const vd odd = as_stored(scale_normal_lanes(src, z1[v]), to_float);
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
    block += uint64_t(kNormalVecs) * kW;
  }
}

// Any stride (the fused path's selected columns): each lane finds its own block and word.
void normal_strided(const Source& src, bool to_float, uint64_t first, uint64_t stride, uint64_t n,
                    double* out) {
  vu index;
  for (int l = 0; l < kW; ++l) index[l] = first + uint64_t(l) * stride;
  const uint64_t step = kW * stride;
  for (uint64_t at = 0; at < n; at += kW) {
    vu w0, w1;
    philox_words(index >> 1, src.keys, w0, w1);
    const vu odd = vu{} - (index & 1);
    const vu w = (w1 & odd) | (w0 & ~odd);
    const vd x = as_stored(scale_normal_lanes(src, ziggurat_lanes(src, index, w)), to_float);
    index += step;
    if (at + kW <= n) {
      __builtin_memcpy(out + at, &x, sizeof(x));
    } else {
      for (uint64_t j = 0; at + j < n; ++j) out[at + j] = x[j];
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
  Source src{philox_keys(g.seed), g.param1, g.param0, g.seed};
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

// The normal generator's standard normal of given words, kW at a time (kernels.h).
void ziggurat_words(uint64_t seed, const uint64_t* index, const uint64_t* words, uint64_t n, double* out) {
  const Source src{philox_keys(seed), 1.0, 0.0, seed};
  for (uint64_t i = 0; i < n; i += kW) {
    vu at{}, w{};
    for (uint64_t l = 0; l < kW && i + l < n; ++l) {
      at[l] = index[i + l];
      w[l] = words[i + l];
    }
    const vd z = ziggurat_lanes(src, at, w);
    for (uint64_t l = 0; l < kW && i + l < n; ++l) out[i + l] = z[l];
  }
}

}  // namespace
}  // namespace psched
