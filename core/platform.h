// Macros that let one header serve host code (g++) and device code (nvcc): the generators and the
// chunk geometry are defined once and evaluated identically on the CPU backend and in CUDA kernels.
#pragma once

#if defined(__CUDACC__)
#define PSCHED_HD __host__ __device__ __forceinline__
#else
#define PSCHED_HD inline
#endif
