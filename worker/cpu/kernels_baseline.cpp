// The CPU kernels built for baseline x86-64 (SSE2); kernels.cpp picks one at run time.
#include "worker/cpu/kernels_impl.h"

namespace psched {

extern const CpuKernels kCpuKernelsBaseline;
const CpuKernels kCpuKernelsBaseline{"baseline", generate, reduce, reduce_squares, ziggurat_words};

}  // namespace psched
