// The body of the CPU kernels (kernels.h), included once by each of kernels_baseline.cpp,
// kernels_avx2.cpp and kernels_avx512.cpp, which are compiled with different -m flags. Everything
// here has internal linkage (anonymous namespace, no std:: templates, no inline functions of other
// headers): code compiled for AVX-512 must never be what the linker picks for a baseline caller.
//
// GCC vector types one register wide (8, 4 or 2 doubles); the few operations they lack
// (32x32->64-bit multiply, sqrt, fma, table gathers, lane shuffles) come from intrinsics per
// instruction set. A multiply and an add are fused only where the element definition says fma
// (the project builds with -ffp-contract=off), and an fma rounds once on every build (the FMA
// instruction on AVX2 and AVX-512, libm's fma() per lane on the baseline build), so every build
// rounds identically.
//
// The body is in three parts: the registers of lanes and their operations (lanes_impl.h), element
// generation (generate_impl.h) and reduction (reduce_impl.h, with plain_adds_impl.h's proof that
// lets its lo additions go plain).
#pragma once

#include "worker/cpu/generate_impl.h"
#include "worker/cpu/reduce_impl.h"
