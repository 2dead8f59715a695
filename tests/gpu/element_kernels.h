// A device kernel for tests/gpu/cuda_elements_test.cpp: the normal generator's Box-Muller pair of
// given uniforms, computed on the GPU (element_kernels.cu), so the test can feed edge values that
// Philox rarely draws and compare them with the host reference bit for bit.
#pragma once

#include <cstddef>

namespace psched::gpu_test {

// For i < n: box_muller({u0[i], u1[i]}) (core/generators.h) evaluated on the current device.
// Host arrays in and out. Throws CudaError when a CUDA call fails.
void device_box_muller(const double* u0, const double* u1, size_t n, double* even, double* odd);

}  // namespace psched::gpu_test
