// A device kernel for tests/gpu/cuda_elements_test.cpp: the normal generator's ziggurat of given
// Philox words, computed on the GPU (element_kernels.cu), so the test can feed words that take
// each of its paths, which Philox draws rarely, and compare them with the host reference bit for
// bit.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psched::gpu_test {

// For i < n: ziggurat(seed, index[i], words[i]) (core/generators.h) evaluated on the current
// device. Host arrays in and out. Throws CudaError when a CUDA call fails.
void device_ziggurat(uint64_t seed, const uint64_t* index, const uint64_t* words, size_t n, double* out);

}  // namespace psched::gpu_test
