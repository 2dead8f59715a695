// The normal generator's tables and its one transcendental function, defined once (docs/design.md,
// "The element definition"): the ziggurat's layers (core/ziggurat_table.h) and log(x) on (0, 1], a
// fixed sequence of IEEE-754 double operations (add, subtract, multiply and fused multiply-add,
// each rounded to nearest; no division), exact bit operations and loads from one table
// (core/log_table.h). A multiply and an add are fused only where written as fma(): everything else
// is rounded on its own (host code builds with -ffp-contract=off; DeviceOps rounds explicitly).
// They are templates on the arithmetic, so the scalar host reference (core/generators.h), the
// CPU's vector lanes (worker/cpu/generate_impl.h, the ziggurat's slow path) and CUDA device code
// (DeviceOps below) run the same sequence and get the same bits.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/log_table.h"
#include "core/ziggurat_table.h"

#if defined(__CUDACC__)
#define PSCHED_ELEMENT_MATH __host__ __device__ __forceinline__
#else
#define PSCHED_ELEMENT_MATH inline __attribute__((always_inline))
#endif

namespace psched::element_math {

// An arithmetic (Ops) names a value type and how to see its bits:
//   Ops::Real   double, or a vector of doubles: + - * round to nearest and are never contracted;
//               mixed with double constants
//   Ops::Bits   uint64_t, or a vector of them with the same lanes: & | ^ ~ + - << >> per lane
//   Ops::bits(Real) -> Bits, Ops::real(Bits) -> Real   reinterpretations (no conversion)
//   Ops::splat(double) -> Real                         the constant in every lane
//   Ops::fma(Real a, Real b, Real c) -> Real           a * b + c rounded once (IEEE fusedMultiplyAdd)
//   Ops::log_entry(Bits i) -> LogEntry<Real>           kLogTable[i] (i < kLogTableSize)
//   Ops::constants() -> const Constants&               kConstants, wherever the arithmetic keeps it
// Lanes never interact, so a vector lane computes exactly what the scalar form computes.

inline constexpr int kLogTableBits = PSCHED_LOG_TABLE_BITS;
inline constexpr uint64_t kLogTableSize = uint64_t{1} << kLogTableBits;

struct LogTableEntry {
  double invc, logc;
};

// The definition's constants that no instruction can hold as an immediate (their low 32 bits are
// not zero): log's ln 2 parts and polynomial. Each arithmetic reads them through Ops::constants():
// the host and the CPU lanes from this constexpr copy, the device from constant memory, which
// ptxas loads once a thread or takes as an operand (as literals, each took two moves again for
// every use: bench/README.md, "Constants from constant memory"). Same values, same operations,
// same bits.
struct Constants {
  double ln2_hi, ln2_lo;  // ln 2 = ln2_hi + ln2_lo; ln2_hi has 43 significant bits
  double a1, a3, a4, a5;  // log1p's odd-numbered coefficients (A0, A2 are immediates)
};
#define PSCHED_ELEMENT_CONSTANTS                                                             \
  {0x1.62e42fefa3800p-1, 0x1.ef35793c76730p-45,                                             \
   0x1.5555555555555p-2, 0x1.999999999999ap-3, -0x1.5555555555555p-3, 0x1.2492492492492p-3}
inline constexpr Constants kConstants = PSCHED_ELEMENT_CONSTANTS;
alignas(16) inline constexpr LogTableEntry kLogTable[kLogTableSize] = {PSCHED_LOG_TABLE_ENTRIES};

// The ziggurat's layers (core/gen_ziggurat_table.py says what each is): the fast path reads
// ZigguratFast {k_i, w_i}, the rare wedge test ZigguratWedge {f_i, d_i}. k_i is an integer below
// 2^53, kept as a double (exact) so that the fast test compares doubles.
inline constexpr int kZigguratLayers = PSCHED_ZIGGURAT_LAYERS;
inline constexpr double kZigguratR = PSCHED_ZIGGURAT_R;        // x_1: where the tail starts
inline constexpr double kZigguratInvR = PSCHED_ZIGGURAT_INV_R;  // 1 / r, rounded
struct ZigguratFast {
  double k, w;
};
struct ZigguratWedge {
  double f, d;
};
alignas(16) inline constexpr ZigguratFast kZigguratFast[kZigguratLayers] = {PSCHED_ZIGGURAT_FAST_ENTRIES};
alignas(16) inline constexpr ZigguratWedge kZigguratWedge[kZigguratLayers] = {PSCHED_ZIGGURAT_WEDGE_ENTRIES};

template <class Real>
struct LogEntry {
  Real invc, logc;
};

// a * b + c rounded once, for any mix of Real and double constants.
template <class Ops, class T>
PSCHED_ELEMENT_MATH typename Ops::Real lift(T x) {
  if constexpr (std::is_same_v<T, double>) {
    return Ops::splat(x);
  } else {
    return x;
  }
}
template <class Ops, class A, class B, class C>
PSCHED_ELEMENT_MATH typename Ops::Real fma(A a, B b, C c) {
  return Ops::fma(lift<Ops>(a), lift<Ops>(b), lift<Ops>(c));
}

// log(x) for 2^-1022 <= x <= 1 (the ziggurat's slow path calls it with 1 - u in [2^-53, 1] and with
// heights in [f(r), 1), f(r) = 0.0013), by a table and a polynomial, with no division (the table
// method of Tang, "Table-driven implementation of the logarithm function in IEEE floating-point
// arithmetic", TOMS 16(4), 1990, in the form of ARM's optimized-routines log):
//   x = 2^k z with z in [0.6875, 1.375), exactly by bits; i = the top 8 bits of z's significand
//   past 0x3fe6 (256 subintervals, core/gen_log_table.py); r = fma(z, invc_i, -1), |r| < 2^-8;
//   log(x) = k ln2 + logc_i + log1p(r), with
//   log1p(r) = r + r^2 (A0 + r (A1 + r (A2 + r (A3 + r (A4 + r A5))))), A_j = (-1)^(j+1) / (j + 2)
//   (Taylor: the first term left out, r^8 / 8, is under 2^-59 of r).
// The sums are carried exactly where it matters: k ln2_hi is exact (ln2_hi has 43 significant
// bits), w = k ln2_hi + logc and hi = w + r each keep their rounding error (Fast2Sum: |k ln2_hi| >
// |logc| unless k = 0, |w| > |r| unless w = 0), and everything small is added to hi once, last.
// The two subintervals beside 1 have invc = 1, logc = 0: log(1) = 0 exactly, and log(x) < 0 for
// x < 1. Error < 0.65 ulp (0.62 measured; tests/core/element_math_test.cpp).
template <class Ops>
PSCHED_ELEMENT_MATH typename Ops::Real log_unit(typename Ops::Real x) {
  using Real = typename Ops::Real;
  using Bits = typename Ops::Bits;
  const Constants& c = Ops::constants();
  constexpr double A0 = -0.5, A2 = -0.25;
  constexpr uint64_t kOffset = 0x3fe6000000000000u;  // the bits of 0.6875
  constexpr uint64_t kExponent = 0xfff0000000000000u;
  const Bits ix = Ops::bits(x);
  const Bits tmp = ix - kOffset;
  const Bits i = (tmp >> (52 - kLogTableBits)) & (kLogTableSize - 1);
  const Bits iz = ix - (tmp & kExponent);  // z = x / 2^k
  // -k >= 0 (x <= 1), as a double, exactly: the small integer in the low bits of 2^52.
  const Real minus_k = Ops::real(((iz - ix) >> 52) | 0x4330000000000000u) - 0x1p52;
  const LogEntry<Real> t = Ops::log_entry(i);
  const Real r = fma<Ops>(Ops::real(iz), t.invc, -1.0);
  const Real k_ln2_hi = minus_k * -c.ln2_hi;  // exact
  const Real w = k_ln2_hi + t.logc;
  const Real w_err = (k_ln2_hi - w) + t.logc;
  const Real hi = w + r;
  const Real lo = fma<Ops>(minus_k, -c.ln2_lo, ((w - hi) + r) + w_err);
  const Real r2 = r * r;
  const Real q =
      fma<Ops>(r, fma<Ops>(r, fma<Ops>(r, fma<Ops>(r, fma<Ops>(r, c.a5, c.a4), c.a3), A2), c.a1), A0);
  return hi + fma<Ops>(r2, q, lo);
}

// Host scalar doubles (g++ with -ffp-contract=off; nvcc passes the flag to its host compiler).
// __builtin_fma is the FMA instruction where the build targets one, else libm's fma(): both round
// once.
struct HostOps {
  using Real = double;
  using Bits = uint64_t;
  static inline Bits bits(Real x) { return __builtin_bit_cast(Bits, x); }
  static inline Real real(Bits b) { return __builtin_bit_cast(Real, b); }
  static inline Real splat(double x) { return x; }
  static inline Real fma(Real a, Real b, Real c) { return __builtin_fma(a, b, c); }
  static inline LogEntry<Real> log_entry(Bits i) { return {kLogTable[i].invc, kLogTable[i].logc}; }
  static constexpr const Constants& constants() { return kConstants; }
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
#undef PSCHED_DEVICE_REAL_OP
__device__ __forceinline__ DeviceReal operator-(DeviceReal a) { return {-a.v}; }

// The log table in device memory (each translation unit its own copy: no relocatable device code),
// read through the read-only cache: a warp's lanes index it freely.
alignas(16) static __device__ const LogTableEntry kLogTableDevice[kLogTableSize] = {PSCHED_LOG_TABLE_ENTRIES};
// The constants in constant memory, read at addresses known when compiled, so each can be an
// operand. Not const: nvcc folds a const one's values back into literals (and moves).
static __constant__ Constants kConstantsDevice = PSCHED_ELEMENT_CONSTANTS;
// The ziggurat's layers, as the log table: indexed by a random byte, so read through the read-only
// cache rather than constant memory (which serialises a warp's different addresses).
alignas(16) static __device__ const ZigguratFast kZigguratFastDevice[kZigguratLayers] = {PSCHED_ZIGGURAT_FAST_ENTRIES};
alignas(16) static __device__ const ZigguratWedge kZigguratWedgeDevice[kZigguratLayers] = {PSCHED_ZIGGURAT_WEDGE_ENTRIES};

struct DeviceOps {
  using Real = DeviceReal;
  using Bits = uint64_t;
  static __device__ __forceinline__ Bits bits(Real x) {
    return uint64_t(__double_as_longlong(x.v));
  }
  static __device__ __forceinline__ Real real(Bits b) {
    return {__longlong_as_double(int64_t(b))};
  }
  static __device__ __forceinline__ Real splat(double x) { return {x}; }
  static __device__ __forceinline__ Real fma(Real a, Real b, Real c) { return {__fma_rn(a.v, b.v, c.v)}; }
  static __device__ __forceinline__ LogEntry<Real> log_entry(Bits i) {
    const double2 e = __ldg(reinterpret_cast<const double2*>(kLogTableDevice) + i);
    return {{e.x}, {e.y}};
  }
  static __device__ __forceinline__ const Constants& constants() { return kConstantsDevice; }
  static __device__ __forceinline__ Real from_double(double x) { return {x}; }
  static __device__ __forceinline__ double to_double(Real x) { return x.v; }
};
#endif

// Layer i's entries, from the table the code runs beside (i < kZigguratLayers).
PSCHED_ELEMENT_MATH ZigguratFast ziggurat_fast_entry(uint32_t i) {
#if defined(__CUDA_ARCH__)
  const double2 e = __ldg(reinterpret_cast<const double2*>(kZigguratFastDevice) + i);
  return {e.x, e.y};
#else
  return kZigguratFast[i];
#endif
}
PSCHED_ELEMENT_MATH ZigguratWedge ziggurat_wedge_entry(uint32_t i) {
#if defined(__CUDA_ARCH__)
  const double2 e = __ldg(reinterpret_cast<const double2*>(kZigguratWedgeDevice) + i);
  return {e.x, e.y};
#else
  return kZigguratWedge[i];
#endif
}

}  // namespace psched::element_math
