#include "worker/cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>

namespace psched {

extern const CpuKernels kCpuKernelsBaseline;
#if defined(PSCHED_CPU_KERNELS_X86)
extern const CpuKernels kCpuKernelsAvx2;
extern const CpuKernels kCpuKernelsAvx512;
#endif

void lanes_init(ReduceLanes& lanes) {
  for (int l = 0; l < 8; ++l) {
    lanes.sum[l] = 0.0;
    lanes.min[l] = std::numeric_limits<double>::infinity();
    lanes.max[l] = -std::numeric_limits<double>::infinity();
  }
}

void lanes_total(const ReduceLanes& lanes, double& sum, double& min, double& max) {
  const double* s = lanes.sum;
  sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  min = lanes.min[0];
  max = lanes.max[0];
  for (int l = 1; l < 8; ++l) {
    min = lanes.min[l] < min ? lanes.min[l] : min;
    max = lanes.max[l] > max ? lanes.max[l] : max;
  }
}

void streaming_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

const CpuKernels* cpu_kernels_for(const char* isa) {
  if (std::strcmp(isa, "baseline") == 0) return &kCpuKernelsBaseline;
#if defined(PSCHED_CPU_KERNELS_X86)
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  if (std::strcmp(isa, "avx2") == 0)
    return __builtin_cpu_supports("avx2") ? &kCpuKernelsAvx2 : nullptr;
  if (std::strcmp(isa, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
               ? &kCpuKernelsAvx512
               : nullptr;
#endif
  return nullptr;
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels* const chosen = [] {
    const char* cap = std::getenv("PSCHED_CPU_KERNELS");
    for (const char* isa : {"avx512", "avx2", "baseline"}) {
      const CpuKernels* k = cpu_kernels_for(isa);
      if (k && (cap == nullptr || *cap == '\0' || std::strcmp(cap, isa) == 0)) return k;
      if (cap && std::strcmp(cap, isa) == 0) break;  // asked for a build this CPU cannot run
    }
    return &kCpuKernelsBaseline;
  }();
  return *chosen;
}

}  // namespace psched
