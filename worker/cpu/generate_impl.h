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

// Philox rounds kFirst, ..., 9 on four words a lane. Lanes hold 32-bit words in 64-bit slots;
// upper halves may carry garbage until the final masks (mul_lo32 ignores them).
template <int kFirst>
inline __attribute__((always_inline)) void philox_rounds(vu& c0, vu& c1, vu& c2, vu& c3, const PhiloxKeys& k) {
#pragma GCC unroll 10
  for (int r = kFirst; r < kPhiloxRounds; ++r) {
    const vu p0 = mul_lo32(c0, kPhiloxM0);
    const vu p1 = mul_lo32(c2, kPhiloxM1);
    c0 = high_half(p1) ^ c1 ^ k.k0[r];
    c1 = p1;
    c2 = high_half(p0) ^ c3 ^ k.k1[r];
    c3 = p0;
  }
}

// The two 64-bit words of philox4x32_10(index, index >> 32, 0, 0, key): w0 from words 0 and 1, w1
// from words 2 and 3.
inline __attribute__((always_inline)) void philox_words(vu index, const PhiloxKeys& k, vu& w0, vu& w1) {
  // Round 0 with c2 = c3 = 0: the second product is zero.
  const vu p00 = mul_lo32(index, kPhiloxM0);
  vu c0 = (index >> 32) ^ k.k0[0];
  vu c1 = vu{} + 0;
  vu c2 = high_half(p00) ^ k.k1[0];
  vu c3 = p00;
  philox_rounds<1>(c0, c1, c2, c3, k);
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

// The arithmetic of element_math.h (the slow path's log_unit) on one register of lanes. A type
// local to this file, so the functions instantiated with it stay internal too.
struct VecOps {
  using Real = vd;
  using Bits = vu;
  static inline __attribute__((always_inline)) Bits bits(Real x) { return (vu)x; }
  static inline __attribute__((always_inline)) Real real(Bits b) { return (vd)b; }
  static inline __attribute__((always_inline)) Real splat(double x) { return vd{} + x; }
  static inline __attribute__((always_inline)) Real fma(Real a, Real b, Real c) { return fma_lanes(a, b, c); }
  static constexpr const element_math::Constants& constants() { return element_math::kConstants; }
  static inline __attribute__((always_inline)) element_math::LogEntry<Real> log_entry(Bits i) {
    return {gather_pairs(&element_math::kLogTable[0].invc, i), gather_pairs(&element_math::kLogTable[0].logc, i)};
  }
};

// +-x by word w's sign bit (normal_signed, core/generators.h).
inline __attribute__((always_inline)) vd signed_by(vd x, vu w) {
  return (vd)((vu)x ^ ((w & kNormalSignBit) << 55));
}

// Each lane's layer entry {k_i, w_i} (element_math::kZigguratFast) as two registers. On AVX-512
// and AVX2, one 16-byte load an entry and shuffles: the two gathers they replace (vgatherqpd, and
// the compare that waited on it, 23 % of normal_pairs' samples) made the DeepOps job in process
// 2.50-2.75 GB/s against 2.94-3.05 loaded (AVX2 1.90 against 1.99-2.02; this VM's AMD EPYC).
inline __attribute__((always_inline)) void layer_entries(vu layer, vd& k, vd& w) {
#if defined(__AVX512F__) || defined(__AVX2__)
  typedef double v2d __attribute__((vector_size(16)));
  v2d e[kW];  // k_i w_i of lane l's layer
  for (int l = 0; l < kW; ++l) __builtin_memcpy(&e[l], &element_math::kZigguratFast[layer[l]], 16);
#if defined(__AVX512F__)
  typedef double v4d __attribute__((vector_size(32)));
  const v4d e01 = __builtin_shufflevector(e[0], e[1], 0, 1, 2, 3);
  const v4d e23 = __builtin_shufflevector(e[2], e[3], 0, 1, 2, 3);
  const v4d e45 = __builtin_shufflevector(e[4], e[5], 0, 1, 2, 3);
  const v4d e67 = __builtin_shufflevector(e[6], e[7], 0, 1, 2, 3);
  const vd lo = __builtin_shufflevector(e01, e23, 0, 1, 2, 3, 4, 5, 6, 7);
  const vd hi = __builtin_shufflevector(e45, e67, 0, 1, 2, 3, 4, 5, 6, 7);
#else
  const vd lo = __builtin_shufflevector(e[0], e[1], 0, 1, 2, 3), hi = __builtin_shufflevector(e[2], e[3], 0, 1, 2, 3);
#endif
  k = every_other_lane<0>(lo, hi);
  w = every_other_lane<1>(lo, hi);
#else
  k = gather_pairs(&element_math::kZigguratFast[0].k, layer);
  w = gather_pairs(&element_math::kZigguratFast[0].w, layer);
#endif
}

// The ziggurat's fast path (ziggurat_fast, core/generators.h) in lanes: the layer's entry, a
// conversion, a multiply, a compare. Returns x = j w_i (unsigned); fast gets all ones in the lanes
// where +-x is the element (j < k_i), zero where it needs the slow path (about 0.7 %).
inline __attribute__((always_inline)) vd ziggurat_fast_x(vu w, vu& fast) {
  const vu layer = w & 0xffu;
  const vd j = to_double(w >> kNormalJShift);  // exact: below 2^53
  vd k, wi;
  layer_entries(layer, k, wi);
  fast = (vu)(j < k);
  return j * wi;
}

// The fast path's +-x; slow gets all ones in the lanes whose element needs the slow path.
inline __attribute__((always_inline)) vd ziggurat_fast_lanes(vu w, vu& slow) {
  vu fast;
  const vd x = ziggurat_fast_x(w, fast);
  slow = ~fast;
  return signed_by(x, w);
}

// The slow path (ziggurat_slow, core/generators.h) in lanes, for the lanes todo marks: element
// index[l] with word w[l], whose fast path failed. Every lane takes the scalar form's steps, an
// attempt at a time, until each has its element; the other lanes come back 0. Rare (0.7 % of
// elements), but the scalar form's chain of ~300 cycles an element cost the CPU a quarter of its
// generation time; kW lanes at a time overlap it.
inline vd ziggurat_slow_lanes(const Source& src, vu index, vu w, vu todo) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  vd x{}, z{};
  vu tail{};         // all ones: in layer 0's own loop (draws again, keeps the word and its sign)
  vu left = todo;    // all ones: no element yet
  for (uint32_t attempt = 1; attempt <= kNormalMostAttempts; ++attempt) {
    const vu layer = w & 0xffu;
    const vu fresh = left & ~tail;  // the fast path on w (the caller's word fails it)
    vu fast;
    const vd fresh_x = ziggurat_fast_x(w, fast);
    const vu done = fresh & fast;
    z = select_lanes(done, signed_by(fresh_x, w), z);
    x = select_lanes(fresh, fresh_x, x);
    tail |= fresh & ~fast & (vu)(layer == 0);
    left &= ~done;
    if (!any_set(left)) return z;
    vu d0 = index, d1 = index >> 32, d2 = vu{} + attempt, d3 = vu{} + kNormalSlowTag;
    philox_rounds<0>(d0, d1, d2, d3, src.keys);  // philox4x32_10(index, index >> 32, attempt, tag)
    const vd u0 = to_double(((d0 << 32) | (d1 & kLow32)) >> kNormalJShift) * kTwoPowMinus53;
    const vu next = (d2 << 32) | (d3 & kLow32);
    const vu in_tail = left & tail, in_wedge = left & ~tail;
    if (any_set(in_tail)) {
      const vd u1 = to_double(next >> kNormalJShift) * kTwoPowMinus53;
      const vd a = element_math::log_unit<VecOps>(1.0 - u0) * -element_math::kZigguratInvR;
      const vd b2 = element_math::log_unit<VecOps>(1.0 - u1) * -2.0;
      const vd tail_x = element_math::kZigguratR + a;
      x = select_lanes(in_tail, tail_x, x);
      const vu ok = in_tail & (vu)(b2 > a * a);
      z = select_lanes(ok, signed_by(tail_x, w), z);
      left &= ~ok;
    }
    if (any_set(in_wedge)) {
      const vd y = fma_lanes(u0, gather_pairs(&element_math::kZigguratWedge[0].d, layer),
                             gather_pairs(&element_math::kZigguratWedge[0].f, layer));
      const vu ok = in_wedge & (vu)(element_math::log_unit<VecOps>(y) < x * x * -0.5);
      z = select_lanes(ok, signed_by(x, w), z);
      left &= ~ok;
      w = (vu)select_lanes(in_wedge & ~ok, (vd)next, (vd)w);
    }
  }
  return select_lanes(left, signed_by(x, w), z);  // after kNormalMostAttempts, as the scalar form
}

// The elements the fast path left, each written where it belongs kW at a time: a place keeps the
// fast path's value until its lane of the slow path fills it. flush() before the places are read.
class SlowElements {
 public:
  SlowElements(const Source& src, bool to_float) : src_(src), to_float_(to_float) {}

  // Element index with word w, stored (as_stored, scaled) at place.
  void add(uint64_t index, uint64_t w, double* place) {
    index_[size_] = index;
    word_[size_] = w;
    place_[size_] = place;
    if (++size_ == kW) flush();
  }

  void flush() {
    if (size_ == 0) return;
    vu index{}, w{}, todo{};
    for (int l = 0; l < size_; ++l) {
      index[l] = index_[l];
      w[l] = word_[l];
      todo[l] = ~uint64_t{0};
    }
    const vd v = as_stored(scale_normal_lanes(src_, ziggurat_slow_lanes(src_, index, w, todo)), to_float_);
    for (int l = 0; l < size_; ++l) *place_[l] = v[l];
    size_ = 0;
  }

 private:
  const Source& src_;
  const bool to_float_;
  int size_ = 0;
  uint64_t index_[kW], word_[kW];
  double* place_[kW];
};

// Queues the lanes of (index, w) that slow marks: lane l's element at out[l * step], where
// l * step < n.
inline void add_slow_lanes(SlowElements& slow_elements, vu index, vu w, vu slow, double* out, uint64_t step,
                           uint64_t n) {
  for (uint32_t bits = lane_bits(slow); bits != 0; bits &= bits - 1) {
    const uint64_t l = uint64_t(__builtin_ctz(bits));
    if (l * step < n) slow_elements.add(index[l], w[l], out + l * step);
  }
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
// that the core overlaps many blocks' chains; the elements the fast path leaves (rare) are queued
// after the stage's stores and written by the slow path in lanes, kW at a time.
constexpr int kNormalVecs = 16;

void normal_pairs(const Source& src, bool to_float, uint64_t first, uint64_t n, double* out, bool streaming) {
  SlowElements slow_elements(src, to_float);
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
    if (__builtin_expect(any_set(any), 0)) {
      for (int v = 0; v < vecs; ++v) {
        const vu even = 2 * (block + uint64_t(v) * kW);
        const uint64_t at = i + uint64_t(v) * 2 * kW;
        add_slow_lanes(slow_elements, even, w0[v], slow0[v], out + at, 2, n - at);
        add_slow_lanes(slow_elements, even + 1, w1[v], slow1[v], out + at + 1, 2, n - at - 1);
      }
    }
    block += uint64_t(kNormalVecs) * kW;
  }
  slow_elements.flush();
}

// Any stride (the fused path's selected columns): each lane finds its own block and word.
void normal_strided(const Source& src, bool to_float, uint64_t first, uint64_t stride, uint64_t n,
                    double* out) {
  SlowElements slow_elements(src, to_float);
  vu index;
  for (int l = 0; l < kW; ++l) index[l] = first + uint64_t(l) * stride;
  const uint64_t step = kW * stride;
  for (uint64_t at = 0; at < n; at += kW) {
    vu w0, w1, slow;
    philox_words(index >> 1, src.keys, w0, w1);
    const vu odd = vu{} - (index & 1);
    const vu w = (w1 & odd) | (w0 & ~odd);
    const vd x = as_stored(scale_normal_lanes(src, ziggurat_fast_lanes(w, slow)), to_float);
    if (at + kW <= n) {
      __builtin_memcpy(out + at, &x, sizeof(x));
    } else {
      for (uint64_t j = 0; at + j < n; ++j) out[at + j] = x[j];
    }
    if (__builtin_expect(any_set(slow), 0)) add_slow_lanes(slow_elements, index, w, slow, out + at, 1, n - at);
    index += step;
  }
  slow_elements.flush();
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

// The normal generator's standard normal of given words, kW at a time (kernels.h): the fast path,
// then the slow path in lanes for the lanes it leaves.
void ziggurat_words(uint64_t seed, const uint64_t* index, const uint64_t* words, uint64_t n, double* out) {
  const Source src{philox_keys(seed), 1.0, 0.0};
  for (uint64_t i = 0; i < n; i += kW) {
    vu at{}, w{}, in_run{};
    for (uint64_t l = 0; l < kW && i + l < n; ++l) {
      at[l] = index[i + l];
      w[l] = words[i + l];
      in_run[l] = ~uint64_t{0};
    }
    vu slow;
    vd z = ziggurat_fast_lanes(w, slow);
    slow &= in_run;
    if (any_set(slow)) z = select_lanes(slow, ziggurat_slow_lanes(src, at, w, slow), z);
    for (uint64_t l = 0; l < kW && i + l < n; ++l) out[i + l] = z[l];
  }
}

}  // namespace
}  // namespace psched
