// The CPU kernels built for AVX-512 F + DQ (CMake adds -mavx512f -mavx512dq); kernels.cpp picks
// one build at run time.
#include "worker/cpu/kernels_impl.h"

namespace psched {

extern const CpuKernels kCpuKernelsAvx512;
const CpuKernels kCpuKernelsAvx512{"avx512", generate, reduce, reduce_squares, ziggurat_words};

}  // namespace psched
