// The CPU kernels built for AVX2 with FMA (CMake adds -mavx2 -mfma); kernels.cpp picks one at run time.
#include "worker/cpu/kernels_impl.h"

namespace psched {

extern const CpuKernels kCpuKernelsAvx2;
const CpuKernels kCpuKernelsAvx2{"avx2", generate, reduce, reduce_squares, ziggurat_words};

}  // namespace psched
