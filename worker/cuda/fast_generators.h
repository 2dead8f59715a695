// Device-tuned forms of core/generators.h for the CUDA kernels, bit-identical to it: Philox is
// integer arithmetic, and this form just uses 32-bit multiplies where the shared one's 64-bit
// products cost the GPU several instructions each; the normal's ziggurat is the shared definition
// (core/generators.h) in explicitly rounded device arithmetic. Plain C++ where it can be, so
// the host can check the Philox against the shared definition.
#pragma once

#include <cstdint>

#include "core/generators.h"
#include "core/job_spec.h"
#include "core/platform.h"

namespace psched::gpu {

PSCHED_HD uint32_t mul_hi32(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return uint32_t((uint64_t{a} * b) >> 32);
#endif
}

// A generator as the kernels take it: the job's parameters and Philox's round keys for its seed,
// made once on the host (keyed()). Passed by value in a launch's parameters, which live in
// constant memory: the kernels read each round's key there instead of adding it up again for
// every element (core/generators.h, PhiloxKeys).
struct KeyedGenerator : GeneratorParams {
  PhiloxKeys keys;
};

inline KeyedGenerator keyed(const GeneratorParams& g) { return KeyedGenerator{g, philox_keys(g.seed)}; }

// The two 64-bit words of philox4x32_10(index, index >> 32, 0, 0, seed) for keys =
// philox_keys(seed): w0 from words 0 and 1, w1 from 2 and 3.
PSCHED_HD void philox_words_fast(const PhiloxKeys& keys, uint64_t index, uint64_t& w0, uint64_t& w1) {
  constexpr uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1;
  uint32_t c0 = uint32_t(index), c1 = uint32_t(index >> 32), c2 = 0, c3 = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint32_t hi0 = mul_hi32(kM0, c0), lo0 = kM0 * c0;
    const uint32_t hi1 = mul_hi32(kM1, c2), lo1 = kM1 * c2;
    c0 = hi1 ^ c1 ^ keys.k0[round];
    c1 = lo1;
    c2 = hi0 ^ c3 ^ keys.k1[round];
    c3 = lo0;
  }
  w0 = uint64_t{c0} << 32 | c1;
  w1 = uint64_t{c2} << 32 | c3;
}

// uniform_pair(seed, index) for keys = philox_keys(seed), bit for bit.
PSCHED_HD UniformPair uniform_pair_fast(const PhiloxKeys& keys, uint64_t index) {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  uint64_t a, b;
  philox_words_fast(keys, index, a, b);
  return UniformPair{double(a >> 11) * kTwoPowMinus53, double(b >> 11) * kTwoPowMinus53};
}

#if defined(__CUDACC__)
// Elements 2m and 2m + 1 of standard_normal, from Philox block m, as far as the ziggurat's fast
// path takes them: z holds each element where its flag is set. The words are kept for the slow
// path, which the kernels run apart (generate.cu, reduce.cu: a block defers the ~0.7 % the fast
// path leaves and finishes them together, since a slow path run in place holds up its warp).
struct NormalPair {
  uint64_t w0, w1;
  double even, odd;
  bool even_done, odd_done;
};

// The ziggurat's fast-path layers (element_math::kZigguratFast) in a block's shared memory, as the
// fused reduce keeps them (a fused 10000² chunk: 0.222 ms with them, one H200). The generate
// kernel reads them through the read-only cache instead: there shared memory measured no better
// (0.436 against 0.430 ms a chunk) and cost each block a load and a barrier first.
struct ZigguratLayers {
  element_math::ZigguratFast layer[element_math::kZigguratLayers];

  // Every thread of the block, then a __syncthreads() before the first use.
  __device__ void load(uint32_t thread, uint32_t threads) {
    for (uint32_t i = thread; i < uint32_t(element_math::kZigguratLayers); i += threads)
      layer[i] = element_math::ziggurat_fast_entry(i);
  }
  __device__ const element_math::ZigguratFast& of(uint64_t w) const { return layer[w & 0xff]; }
};

__device__ __forceinline__ NormalPair normal_pair_fast_path(const KeyedGenerator& g, uint64_t pair) {
  NormalPair z;
  philox_words_fast(g.keys, pair, z.w0, z.w1);
  z.even_done = ziggurat_fast(z.w0, z.even);
  z.odd_done = ziggurat_fast(z.w1, z.odd);
  return z;
}

// Element index's word of its Philox block (normal_word, core/generators.h).
__device__ __forceinline__ uint64_t normal_word_fast(const KeyedGenerator& g, uint64_t index) {
  uint64_t w0, w1;
  philox_words_fast(g.keys, index >> 1, w0, w1);
  return (index & 1) ? w1 : w0;
}

// standard_normal(seed, index) whole: the fast path, else the slow one in place.
__device__ __forceinline__ double standard_normal_fast(const KeyedGenerator& g, uint64_t index) {
  const uint64_t w = normal_word_fast(g, index);
  double z;
  if (ziggurat_fast(w, z)) return z;
  return ziggurat_slow(g.seed, index, w);
}

// element_value(g, index), bit for bit, for a generator kind fixed at compile time.
template <Generator Kind>
__device__ __forceinline__ double element_value_fast(const KeyedGenerator& g, uint64_t index) {
  if constexpr (Kind == Generator::kNormal) {
    return scale_normal(g.param1, standard_normal_fast(g, index), g.param0);
  } else if constexpr (Kind == Generator::kUniform) {
    return mul_add_rounded(g.param1 - g.param0, uniform_pair_fast(g.keys, index).u0, g.param0);
  } else {
    GeneratorParams fixed = g;  // the parameters alone
    fixed.kind = Kind;  // arange, constant: element_value's switch folds away
    return element_value(fixed, index);
  }
}

// element_value_fast's fast path alone: true and the element in v, or false where the normal's
// ziggurat needs its slow path (element_value_fast then gives the element). Other kinds always
// finish.
template <Generator Kind>
__device__ __forceinline__ bool element_value_fast_path(const KeyedGenerator& g, uint64_t index, double& v,
                                                        const ZigguratLayers& layers) {
  if constexpr (Kind == Generator::kNormal) {
    const uint64_t w = normal_word_fast(g, index);
    double z;
    if (!ziggurat_fast_in(layers.of(w), w, z)) return false;
    v = scale_normal(g.param1, z, g.param0);
  } else {
    v = element_value_fast<Kind>(g, index);
  }
  return true;
}
#endif

}  // namespace psched::gpu
