// Registers of lanes for the CPU kernels (kernels_impl.h): GCC vector types one register wide (8,
// 4 or 2 doubles) and the few operations they lack (32x32->64-bit multiply, sqrt, fma, table
// gathers, non-temporal stores, bit selects), from intrinsics per instruction set. Compiled once per
// build (kernels_baseline.cpp, kernels_avx2.cpp, kernels_avx512.cpp), with internal linkage only,
// as everything the kernels include.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>

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

// Lanes kFirst, kFirst + 2, ... of a then of b: the even (kFirst 0) or odd (1) elements of 2 kW
// consecutive ones.
template <int kFirst>
inline __attribute__((always_inline)) vd every_other_lane(vd a, vd b) {
#if defined(__AVX512F__)
  return __builtin_shufflevector(a, b, kFirst, kFirst + 2, kFirst + 4, kFirst + 6, kFirst + 8, kFirst + 10,
                                 kFirst + 12, kFirst + 14);
#elif defined(__AVX2__)
  return __builtin_shufflevector(a, b, kFirst, kFirst + 2, kFirst + 4, kFirst + 6);
#else
  return __builtin_shufflevector(a, b, kFirst, kFirst + 2);
#endif
}

// Per lane: a where mask is all ones, else b.
inline __attribute__((always_inline)) vd select_lanes(vu mask, vd a, vd b) {
  return (vd)(((vu)a & mask) | ((vu)b & ~mask));
}

// Bit l set where lane l of mask (all ones or zero per lane) is set.
inline __attribute__((always_inline)) uint32_t lane_bits(vu mask) {
#if defined(__AVX512F__)
  return _mm512_test_epi64_mask((__m512i)mask, (__m512i)mask);
#elif defined(__AVX2__)
  return uint32_t(_mm256_movemask_pd((__m256d)mask));
#else
  uint32_t bits = 0;
  for (int l = 0; l < kW; ++l) bits |= uint32_t(mask[l] != 0) << l;
  return bits;
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

}  // namespace
}  // namespace psched
