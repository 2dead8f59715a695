// The normal generator's transcendental functions, defined once (docs/design.md, "The element
// definition"): log(x) on (0, 1] and sin/cos(2 pi u) for a 53-bit uniform u, as fixed sequences
// of IEEE-754 double operations (add, subtract, multiply, divide, square root, each rounded to
// nearest, never contracted into an fma) and exact bit operations. They are templates on the
// arithmetic, so the scalar host reference (core/generators.h), the CPU's vector lanes
// (worker/cpu/kernels_impl.h) and CUDA device code (DeviceOps below) run the same sequence and
// get the same bits.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PSCHED_ELEMENT_MATH __host__ __device__ __forceinline__
#else
#define PSCHED_ELEMENT_MATH inline __attribute__((always_inline))
#endif

namespace psched::element_math {

// An arithmetic (Ops) names a value type and how to see its bits:
//   Ops::Real   double, or a vector of doubles: + - * / round to nearest and are never contracted
//               (host code builds with -ffp-contract=off; DeviceOps rounds explicitly); mixed with
//               double constants
//   Ops::Bits   uint64_t, or a vector of them with the same lanes: & | ^ ~ + - << >> per lane
//   Ops::bits(Real) -> Bits, Ops::real(Bits) -> Real   reinterpretations (no conversion)
//   Ops::sqrt(Real) -> Real                             IEEE square root, correctly rounded
// Lanes never interact, so a vector lane computes exactly what the scalar form computes.

// log(x) for 2^-1022 <= x <= 1 (the generator calls it with x = 1 - u0 in [2^-53, 1]): fdlibm's
// __ieee754_log (e_log.c) with its special cases dropped and one formula everywhere.
//   x = 2^k (1 + f) with 1 + f in [sqrt(2)/2, sqrt(2)) (exactly: the significand is halved when
//   its top 20 fraction bits are >= 0x6a09c), s = f / (2 + f),
//   R = z (Lg1 + w (Lg3 + w (Lg5 + w Lg7))) + w (Lg2 + w (Lg4 + w Lg6)), z = s^2, w = z^2,
//   log(x) = k ln2_hi - ((f^2/2 - (s (f^2/2 + R) + k ln2_lo)) - f).
// ln2_hi has 32 significant bits, so k ln2_hi is exact. Error < 0.85 ulp (tests/core/element_math_test.cpp).
template <class Ops>
PSCHED_ELEMENT_MATH typename Ops::Real log_unit(typename Ops::Real x) {
  using Real = typename Ops::Real;
  using Bits = typename Ops::Bits;
  constexpr double ln2_hi = 0x1.62e42feep-1, ln2_lo = 0x1.a39ef35793c76p-33;
  constexpr double Lg1 = 0x1.5555555555593p-1, Lg2 = 0x1.999999997fa04p-2;
  constexpr double Lg3 = 0x1.2492494229359p-2, Lg4 = 0x1.c71c51d8e78afp-3;
  constexpr double Lg5 = 0x1.7466496cb03dep-3, Lg6 = 0x1.39a09d078c69fp-3;
  constexpr double Lg7 = 0x1.2f112df3e5244p-3;
  constexpr double kRoundInt = 0x1.8p52;  // 1.5 * 2^52: integers below 2^51 in its low bits
  // Exact decomposition (x is positive and normal: no sign, no subnormal handling).
  const Bits b = Ops::bits(x);
  const Bits frac_hi = (b >> 32) & 0xfffffu;
  const Bits halve = (frac_hi + 0x95f64u) & 0x100000u;  // 0x100000 where 1 + f would be >= sqrt(2)
  const Real m = Ops::real(((frac_hi | (halve ^ 0x3ff00000u)) << 32) | (b & 0xffffffffu));
  // k = exponent - 1023 (+ 1 when halved), as a double, exactly: modulo-2^64 integer arithmetic
  // puts k into the low bits of 1.5 * 2^52.
  const Bits k_bits = (b >> 52) + (halve >> 20) + (0x4338000000000000u - 1023u);
  const Real k = Ops::real(k_bits) - kRoundInt;
  // The rounded operations, in this order.
  const Real f = m - 1.0;  // exact
  const Real s = f / (f + 2.0);
  const Real z = s * s;
  const Real w = z * z;
  const Real t1 = w * (Lg2 + w * (Lg4 + w * Lg6));
  const Real t2 = z * (Lg1 + w * (Lg3 + w * (Lg5 + w * Lg7)));
  const Real R = t2 + t1;
  const Real hfsq = (f * 0.5) * f;
  return k * ln2_hi - ((hfsq - (s * (hfsq + R) + k * ln2_lo)) - f);
}

template <class Real>
struct SinCos {
  Real sin, cos;
};

// sin(2 pi u) and cos(2 pi u) for u = n 2^-53, 0 <= n < 2^53. The reduction is exact in u, with no
// inexact pi: t = 4u, q = t rounded to the nearest integer (ties to even, by adding 1.5 * 2^52),
// r = t - q in [-1/2, 1/2], so 2 pi u = q pi/2 + r pi/2. r pi/2 is carried as x_hi + x_lo, x_hi =
// 1.5 r (exact: r has at most 50 significant bits), x_lo = r S0_lo (S0_lo = pi/2 - 1.5, rounded),
// which is r pi/2 to about 2^-57. With z = r^2:
//   sin(r pi/2) = x_hi + (x_lo + (r z) (S1 + z (S2 + z (S3 + z (S4 + z (S5 + z S6))))))
//   cos(r pi/2) = h + ((((1 - h) - half_sq) - x_lo (x_hi + x_lo / 2)) + (z z) (C1 + ... z C6))
//     with half_sq = x_hi^2 / 2 and h = 1 - half_sq, since
//     (r pi/2)^2 / 2 = half_sq + x_lo (x_hi + x_lo / 2): the large part rounded once, and the
//     rounding of 1 - half_sq carried (as fdlibm's __kernel_cos does)
// S_k, C_k are fdlibm's minimax coefficients of __kernel_sin and __kernel_cos (|x| <= pi/4) times
// (pi/2)^(2k+1) and (pi/2)^(2k+2), rounded to double.
// Then q mod 4 picks and signs them: sin = sin r', cos r', -sin r', -cos r' and cos = cos r',
// -sin r', -cos r', sin r' for q mod 4 = 0, 1, 2, 3 (r' = r pi/2). Error < 0.85 ulp (tests/core/element_math_test.cpp).
template <class Ops>
PSCHED_ELEMENT_MATH SinCos<typename Ops::Real> sincos_2pi(typename Ops::Real u) {
  using Real = typename Ops::Real;
  using Bits = typename Ops::Bits;
  constexpr double S0_lo = 0x1.21fb54442d184p-4, S1 = -0x1.4abbce625be47p-1;
  constexpr double S2 = 0x1.466bc67758db1p-4, S3 = -0x1.32d2cce335e6fp-8;
  constexpr double S4 = 0x1.5078301dcf6b6p-13, S5 = -0x1.e300a85fc9574p-19;
  constexpr double S6 = 0x1.e404742f3e351p-25;
  constexpr double C1 = 0x1.03c1f081b5abdp-2;
  constexpr double C2 = -0x1.55d3c7e3ca6fbp-6, C3 = 0x1.e1f5068528e5ep-11;
  constexpr double C4 = -0x1.a6d1edbbb9b9cp-16, C5 = 0x1.f9cd20b415c65p-22;
  constexpr double C6 = -0x1.b2a21ec94163bp-28;
  constexpr double kRoundInt = 0x1.8p52;
  const Real t = u * 4.0;                    // exact
  const Real rounded = t + kRoundInt;        // q in the low bits
  const Real r = t - (rounded - kRoundInt);  // both exact
  const Bits q = Ops::bits(rounded);
  const Real z = r * r;
  const Real x_hi = r * 1.5;
  const Real x_lo = r * S0_lo;
  const Real sin_r =
      x_hi + (x_lo + (r * z) * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6))))));
  const Real half_sq = (x_hi * x_hi) * 0.5;
  const Real h = 1.0 - half_sq;
  const Real cos_r =
      h + ((((1.0 - h) - half_sq) - x_lo * (x_hi + x_lo * 0.5)) +
           (z * z) * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6))))));
  // Odd quadrants swap sin and cos; bit 63 flips the signs.
  const Bits odd = ~((q & 1u) - 1u);  // all ones where q is odd
  const Bits sin_bits = (Ops::bits(cos_r) & odd) | (Ops::bits(sin_r) & ~odd);
  const Bits cos_bits = (Ops::bits(sin_r) & odd) | (Ops::bits(cos_r) & ~odd);
  return SinCos<Real>{Ops::real(sin_bits ^ ((q & 2u) << 62)),
                      Ops::real(cos_bits ^ (((q + 1u) & 2u) << 62))};
}

// The Box-Muller radius sqrt(-2 log(1 - u0)) of a 53-bit uniform u0 (1 - u0 is exact and in
// (0, 1]); the pair's elements are radius * cos(2 pi u1) and radius * sin(2 pi u1).
template <class Ops>
PSCHED_ELEMENT_MATH typename Ops::Real box_muller_radius(typename Ops::Real u0) {
  return Ops::sqrt(log_unit<Ops>(1.0 - u0) * -2.0);
}

// Host scalar doubles (g++ with -ffp-contract=off; nvcc passes the flag to its host compiler).
struct HostOps {
  using Real = double;
  using Bits = uint64_t;
  static inline Bits bits(Real x) { return __builtin_bit_cast(Bits, x); }
  static inline Real real(Bits b) { return __builtin_bit_cast(Real, b); }
  static inline Real sqrt(Real x) { return __builtin_sqrt(x); }
  static inline Real from_double(double x) { return x; }
  static inline double to_double(Real x) { return x; }
};

#if defined(__CUDACC__)
// Device doubles whose every operation is an explicitly rounded intrinsic, so nvcc cannot contract
// a multiply and an add into an fma (as it does for plain doubles).
struct DeviceReal {
  double v;
};
#define PSCHED_DEVICE_REAL_OP(op, intrinsic)                                             \
  __device__ __forceinline__ DeviceReal operator op(DeviceReal a, DeviceReal b) {        \
    return {intrinsic(a.v, b.v)};                                                        \
  }                                                                                      \
  __device__ __forceinline__ DeviceReal operator op(DeviceReal a, double b) {            \
    return {intrinsic(a.v, b)};                                                          \
  }                                                                                      \
  __device__ __forceinline__ DeviceReal operator op(double a, DeviceReal b) {            \
    return {intrinsic(a, b.v)};                                                          \
  }
PSCHED_DEVICE_REAL_OP(+, __dadd_rn)
PSCHED_DEVICE_REAL_OP(-, __dsub_rn)
PSCHED_DEVICE_REAL_OP(*, __dmul_rn)
PSCHED_DEVICE_REAL_OP(/, __ddiv_rn)
#undef PSCHED_DEVICE_REAL_OP

struct DeviceOps {
  using Real = DeviceReal;
  using Bits = uint64_t;
  static __device__ __forceinline__ Bits bits(Real x) {
    return uint64_t(__double_as_longlong(x.v));
  }
  static __device__ __forceinline__ Real real(Bits b) {
    return {__longlong_as_double(int64_t(b))};
  }
  static __device__ __forceinline__ Real sqrt(Real x) { return {__dsqrt_rn(x.v)}; }
  static __device__ __forceinline__ Real from_double(double x) { return {x}; }
  static __device__ __forceinline__ double to_double(Real x) { return x.v; }
};
#endif

}  // namespace psched::element_math
