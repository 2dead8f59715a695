// The device side of tests/gpu/element_kernels.h.
#include "element_kernels.h"

#include "core/generators.h"
#include "worker/cuda/check.h"

namespace psched::gpu_test {
namespace {

__global__ void ziggurat_kernel(uint64_t seed, const uint64_t* index, const uint64_t* words, size_t n,
                                double* out) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  out[i] = ziggurat(seed, index[i], words[i]);
}

}  // namespace

void device_ziggurat(uint64_t seed, const uint64_t* index, const uint64_t* words, size_t n, double* out) {
  if (n == 0) return;
  const size_t bytes = n * sizeof(uint64_t);
  uint64_t* d = nullptr;  // index, words, out, one after another
  PSCHED_CUDA_CHECK(cudaMalloc(&d, 3 * bytes));
  PSCHED_CUDA_CHECK(cudaMemcpy(d, index, bytes, cudaMemcpyHostToDevice));
  PSCHED_CUDA_CHECK(cudaMemcpy(d + n, words, bytes, cudaMemcpyHostToDevice));
  double* result = reinterpret_cast<double*>(d + 2 * n);
  ziggurat_kernel<<<unsigned((n + 255) / 256), 256>>>(seed, d, d + n, n, result);
  PSCHED_CUDA_CHECK(cudaGetLastError());
  PSCHED_CUDA_CHECK(cudaMemcpy(out, result, bytes, cudaMemcpyDeviceToHost));
  PSCHED_CUDA_CHECK(cudaFree(d));
}

}  // namespace psched::gpu_test
