// The array's element values, a pure function of the global position (docs/design.md, "The element
// definition"): the same array whatever the chunking and whichever backend or worker makes a chunk.
// This is the scalar reference; the CPU's vector kernels and the CUDA kernels compute the same IEEE
// operations in the same order (core/element_math.h for the normal's tables and log; a multiply
// and an add fused only where written as an fma, else each rounded), so every generator gives the
// same bits on host and device.
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

// Philox4x32-10, the reference form every backend's fast form must match bit for bit. The device
// unrolls kUnroll of its rounds at a time: all of them by default, 5 for the ziggurat's slow path
// (kSlowPhiloxUnroll). Integer arithmetic: the same words either way.
template <int kUnroll = kPhiloxRounds>
PSCHED_HD Philox4x32 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                   uint32_t k1) {
  constexpr uint32_t kM0 = kPhiloxM0, kM1 = kPhiloxM1;
  constexpr uint32_t kW0 = kPhiloxW0, kW1 = kPhiloxW1;
#if defined(__CUDA_ARCH__)
#pragma unroll(kUnroll)
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

// Standard normals by a ziggurat (Marsaglia and Tsang, "The ziggurat method for generating random
// variables", J. Stat. Softw. 5(8), 2000; 256 layers, core/gen_ziggurat_table.py). Element n takes
// a 64-bit word w of Philox block n >> 1 (words 0 and 1 for an even n, 2 and 3 for an odd one, so
// a block makes two elements as it makes uniform_pair's two uniforms): layer i = w's low byte, the
// sign = bit 8, j = w >> 11 (53 bits), x = j w_i. Where j < k_i (x under the curve: about 99.3 % of
// draws) the element is +-x. Else the slow path (ziggurat_slow) decides with more draws of its own.
// The fast path is a table load, a conversion, a multiply and a compare; with the job's Philox it
// is all a GPU, or a CPU lane, does for almost every element.
inline constexpr uint64_t kNormalSignBit = uint64_t{1} << 8;
inline constexpr int kNormalJShift = 11;
inline constexpr uint32_t kNormalSlowTag = 0x6e6f726du;  // "norm": the slow path's Philox word 3
inline constexpr uint32_t kNormalMostAttempts = 64;
// The slow path's Philox rounds unrolled 5 at a time on the device. It is a function of its own
// (noinline), whose registers count towards every kernel that calls it: fully unrolled it took
// the normal generate kernel from 80 registers to 94 (two blocks an SM where it holds three),
// while one round at a time spent 13 instructions a round on the loop. Five keep 80 and cut
// the kernel's deferred tail (13 % of its instructions for 0.7 % of its elements): a 10000²
// chunk 0.3714-0.3717 ms against 0.3725, the 2 TB job 1.160-1.162 s against 1.166-1.183 (one
// H200, in turns; bench/README.md).
inline constexpr int kSlowPhiloxUnroll = 5;

// Element index's word of its Philox block x.
PSCHED_HD uint64_t normal_word(const Philox4x32& x, uint64_t index) {
  return (index & 1) ? (uint64_t{x.v[2]} << 32 | x.v[3]) : (uint64_t{x.v[0]} << 32 | x.v[1]);
}

// +-x: x with w's sign bit (exact; -0 for j = 0 and the bit set).
PSCHED_HD double normal_signed(double x, uint64_t w) {
  using Ops = ReferenceOps;
  return Ops::to_double(Ops::real(Ops::bits(Ops::from_double(x)) ^ ((w & kNormalSignBit) << 55)));
}

// The fast path: x = j w_i into z (signed) and whether j < k_i, i.e. whether z is the element.
// layer is w's (its low byte's) entry of the table, wherever the caller keeps it.
PSCHED_HD bool ziggurat_fast_in(const element_math::ZigguratFast& layer, uint64_t w, double& z) {
  using Ops = ReferenceOps;
  const double j = double(w >> kNormalJShift);  // exact: below 2^53
  z = normal_signed(Ops::to_double(Ops::from_double(j) * layer.w), w);
  return j < layer.k;
}
PSCHED_HD bool ziggurat_fast(uint64_t w, double& z) {
  return ziggurat_fast_in(element_math::ziggurat_fast_entry(uint32_t(w & 0xff)), w, z);
}

// The rest of the ziggurat, for a word whose fast path failed. Attempt a = 1, 2, ... draws Philox
// block (index, index >> 32, a, kNormalSlowTag) for the seed, 128 bits apart from every element's
// own block (word 2 is 0 there), as two 53-bit uniforms u, u' (words 0-1 and 2-3):
//   layer 0 (the tail beyond r): a = -log(1 - u) / r, b = -log(1 - u'); the element is +-(r + a)
//     where 2b > a^2, else the next attempt draws again (the tail's own loop, same sign);
//   layer i >= 1 (the wedge): y = f_i + u d_i is a uniform height in the layer; where
//     log(y) < -x^2 / 2 (y < f(x)) the element is +-x, else words 2-3 become the next w and the
//     ziggurat starts again with it (fast path included).
// log is element_math's log_unit; every product and sum is rounded on its own. An attempt
// succeeds with probability about 1/2 or more, so 64 always end it in practice (2^-64 or less);
// were they used up, the last x would be the element, so the loop is bounded.
// The CPU lanes run the same steps on a register of lanes (worker/cpu/generate_impl.h,
// ziggurat_slow_lanes); tests compare their bits with these.
#if defined(__CUDACC__)
__host__ __device__ __noinline__ inline
#else
__attribute__((noinline)) inline
#endif
double ziggurat_slow(uint64_t seed, uint64_t index, uint64_t w) {
  using Ops = ReferenceOps;
  using Real = typename Ops::Real;
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;
  double x = 0;
  bool tail = false;  // in layer 0's own loop: draws again, keeps the word and its sign
  for (uint32_t attempt = 1; attempt <= kNormalMostAttempts; ++attempt) {
    const uint32_t i = uint32_t(w & 0xff);
    if (!tail) {
      if (ziggurat_fast(w, x)) return x;
      x = normal_signed(x, w);  // unsigned again
      tail = i == 0;
    }
    const Philox4x32 d = philox4x32_10<kSlowPhiloxUnroll>(uint32_t(index), uint32_t(index >> 32), attempt,
                                                          kNormalSlowTag, uint32_t(seed), uint32_t(seed >> 32));
    const Real u0 = Ops::from_double(double((uint64_t{d.v[0]} << 32 | d.v[1]) >> kNormalJShift) * kTwoPowMinus53);
    const uint64_t next = uint64_t{d.v[2]} << 32 | d.v[3];
    if (tail) {
      const Real u1 = Ops::from_double(double(next >> kNormalJShift) * kTwoPowMinus53);
      const Real a = element_math::log_unit<Ops>(1.0 - u0) * -element_math::kZigguratInvR;
      const Real b2 = element_math::log_unit<Ops>(1.0 - u1) * -2.0;
      x = Ops::to_double(element_math::kZigguratR + a);
      if (Ops::to_double(b2) > Ops::to_double(a * a)) return normal_signed(x, w);
    } else {
      const element_math::ZigguratWedge layer = element_math::ziggurat_wedge_entry(i);
      const Real y = element_math::fma<Ops>(u0, layer.d, layer.f);
      const Real xr = Ops::from_double(x);
      if (Ops::to_double(element_math::log_unit<Ops>(y)) < Ops::to_double(xr * xr * -0.5))
        return normal_signed(x, w);
      w = next;
    }
  }
  return normal_signed(x, w);
}

// The standard normal of word w, element index's: the fast path, else the slow one.
PSCHED_HD double ziggurat(uint64_t seed, uint64_t index, uint64_t w) {
  double z;
  if (ziggurat_fast(w, z)) return z;
  return ziggurat_slow(seed, index, w);
}

PSCHED_HD double standard_normal(uint64_t seed, uint64_t index) {
  const Philox4x32 x = philox4x32_10(uint32_t(index >> 1), uint32_t(index >> 33), 0u, 0u, uint32_t(seed),
                                     uint32_t(seed >> 32));
  return ziggurat(seed, index, normal_word(x, index));
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
