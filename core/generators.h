// The array's element values, a pure function of the global position (docs/design.md, "The element
// definition"): the same array whatever the chunking and whichever backend or worker makes a chunk.
// This is the scalar reference; the CPU's vector kernels and the CUDA kernels compute the same IEEE
// operations in the same order (core/element_math.h for log, sin and cos; a multiply and an add
// fused only where written as an fma, else each rounded), so every generator gives the same bits
// on host and device.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/element_math.h"
#include "core/platform.h"

namespace psched {

// Which generator makes the array's elements (the wire's Generator enum; net/wire_convert.cpp maps
// them). One typed enum for host and device: kernels are templated on it.
enum class Generator : uint8_t { kNormal = 0, kUniform = 1, kArange = 2, kConstant = 3 };

// a * b + c with the product rounded before the add, on host and device alike (nvcc would otherwise
// contract it into an fma and the GPU would disagree with the CPU in the last bit).
PSCHED_HD double mul_add_rounded(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(a, b), c);
#else
  return a * b + c;  // host code is built with -ffp-contract=off (CMake: psched_options)
#endif
}

// normal(mean, std)'s element from its standard normal z: mean + std z, rounded once (an fma on
// every backend: the CPU lanes' FMA instruction, libm's fma(), CUDA's __fma_rn).
PSCHED_HD double scale_normal(double std, double z, double mean) {
#if defined(__CUDA_ARCH__)
  return __fma_rn(std, z, mean);
#else
  return __builtin_fma(std, z, mean);
#endif
}

struct Philox4x32 {
  uint32_t v[4];
};

// Philox4x32-10's constants (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11):
// the round multipliers and the Weyl key increments. The device (worker/cuda/fast_generators.h) and
// vector (worker/cpu/generate_impl.h) forms of the rounds use these same names.
inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;
inline constexpr int kPhiloxRounds = 10;

// Philox4x32-10, the reference form every backend's fast form must match bit for bit.
PSCHED_HD Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                   uint32_t k1) {
  constexpr uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1;
  constexpr uint32_t kW0 = kPhiloxW0, kW1 = kPhiloxW1;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int round = 0; round < kPhiloxRounds; ++round) {
    const uint64_t p0 = uint64_t{kM0} * c0;
    const uint64_t p1 = uint64_t{kM1} * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Philox4x32{{c0, c1, c2, c3}};
}

// Philox4x32-10's round keys for one seed: k0 + r W0 and k1 + r W1 before round r. The same for every
// element of a job, so the CPU lanes and the GPU kernels take them made once rather than adding
// them up again for every element (on the GPU those adds were 18 of a pair's 224 instructions).
struct PhiloxKeys {
  uint32_t k0[kPhiloxRounds], k1[kPhiloxRounds];
};

PSCHED_HD PhiloxKeys philox_keys(uint64_t seed) {
  PhiloxKeys k{};
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < kPhiloxRounds; ++round) {
    k.k0[round] = k0;
    k.k1[round] = k1;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return k;
}

// Two 53-bit uniforms in [0, 1) from one Philox block keyed by seed, counter = linear index.
struct UniformPair {
  double u0, u1;
};

PSCHED_HD UniformPair uniform_pair(uint64_t seed, uint64_t index) {
  const Philox4x32 x = philox4x32_10(uint32_t(index), uint32_t(index >> 32), 0u, 0u,
                                     uint32_t(seed), uint32_t(seed >> 32));
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  const uint64_t a = (uint64_t{x.v[0]} << 32 | x.v[1]) >> 11;
  const uint64_t b = (uint64_t{x.v[2]} << 32 | x.v[3]) >> 11;
  return UniformPair{double(a) * kTwoPowMinus53, double(b) * kTwoPowMinus53};
}

// The arithmetic the scalar reference runs in: plain doubles on the host, explicitly rounded
// intrinsics on the device (element_math.h).
#if defined(__CUDA_ARCH__)
using ReferenceOps = element_math::DeviceOps;
#else
using ReferenceOps = element_math::HostOps;
#endif

// Standard normals by Box-Muller from one Philox block: elements 2m and 2m + 1 share block m (two
// 53-bit uniforms u0, u1) and take the cosine and the sine branch,
//   z(2m) = r cos(2 pi u1), z(2m + 1) = r sin(2 pi u1), r = sqrt(-2 log(1 - u0)),
// as cuRAND's normal2 does: one block and one log per two elements. log, sin and cos are
// element_math.h's, so every backend gets these bits.
struct NormalPair {
  double even, odd;
};

PSCHED_HD NormalPair box_muller(UniformPair u) {
  using Real = ReferenceOps::Real;
  const Real radius = element_math::box_muller_radius<ReferenceOps>(ReferenceOps::from_double(u.u0));
  const element_math::SinCos<Real> angle =
      element_math::sincos_2pi<ReferenceOps>(ReferenceOps::from_double(u.u1));
  return NormalPair{ReferenceOps::to_double(radius * angle.cos),
                    ReferenceOps::to_double(radius * angle.sin)};
}

PSCHED_HD double standard_normal(uint64_t seed, uint64_t index) {
  const NormalPair z = box_muller(uniform_pair(seed, index >> 1));
  return (index & 1) ? z.odd : z.even;
}

// Generator parameters in the form the per-element functions take (a POD; copied to kernels).
struct GeneratorParams {
  Generator kind;
  double param0, param1;
  uint64_t seed;
};

// The element at global linear index r * cols + c.
PSCHED_HD double element_value(const GeneratorParams& g, uint64_t index) {
  switch (g.kind) {
    case Generator::kNormal:  // normal(mean, std)
      return scale_normal(g.param1, standard_normal(g.seed, index), g.param0);
    case Generator::kUniform: {  // uniform(low, high)
      const double u = uniform_pair(g.seed, index).u0;
      return mul_add_rounded(g.param1 - g.param0, u, g.param0);
    }
    case Generator::kArange:  // arange(start, step)
      return mul_add_rounded(g.param1, double(index), g.param0);
    case Generator::kConstant:  // constant(value)
    default:
      return g.param0;
  }
}

}  // namespace psched
