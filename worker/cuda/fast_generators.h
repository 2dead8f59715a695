// Device-tuned forms of core/generators.h for the CUDA kernels, bit-identical to it: Philox is
// integer arithmetic, and this form just uses 32-bit multiplies where the shared one's 64-bit
// products cost the GPU several instructions each; the normal's log, sin and cos are the shared
// element_math.h definition in explicitly rounded device arithmetic. Plain C++ where it can be, so
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

// uniform_pair(seed, index) for keys = philox_keys(seed), bit for bit.
PSCHED_HD UniformPair uniform_pair_fast(const PhiloxKeys& keys, uint64_t index) {
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
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  const uint64_t a = (uint64_t{c0} << 32 | c1) >> 11;
  const uint64_t b = (uint64_t{c2} << 32 | c3) >> 11;
  return UniformPair{double(a) * kTwoPowMinus53, double(b) * kTwoPowMinus53};
}

#if defined(__CUDACC__)
// The Box-Muller pair of block m (elements 2m and 2m + 1 of standard_normal). The per-element form
// below uses the same instructions, so fused and materialized chunks get the same bits.
__device__ __forceinline__ NormalPair standard_normal_pair_fast(const PhiloxKeys& keys, uint64_t pair) {
  return box_muller(uniform_pair_fast(keys, pair));
}

__device__ __forceinline__ double standard_normal_fast(const PhiloxKeys& keys, uint64_t index) {
  const NormalPair z = standard_normal_pair_fast(keys, index >> 1);
  return (index & 1) ? z.odd : z.even;
}

// element_value(g, index), bit for bit, for a generator kind fixed at compile time.
template <Generator Kind>
__device__ __forceinline__ double element_value_fast(const KeyedGenerator& g, uint64_t index) {
  if constexpr (Kind == Generator::kNormal) {
    return scale_normal(g.param1, standard_normal_fast(g.keys, index), g.param0);
  } else if constexpr (Kind == Generator::kUniform) {
    return mul_add_rounded(g.param1 - g.param0, uniform_pair_fast(g.keys, index).u0, g.param0);
  } else {
    GeneratorParams fixed = g;  // the parameters alone
    fixed.kind = Kind;  // arange, constant: element_value's switch folds away
    return element_value(fixed, index);
  }
}
#endif

}  // namespace psched::gpu
