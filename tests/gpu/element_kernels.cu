// The device side of tests/gpu/element_kernels.h.
#include "element_kernels.h"

#include "core/generators.h"
#include "worker/cuda/check.h"

namespace psched::gpu_test {
namespace {

__global__ void box_muller_kernel(const double* u0, const double* u1, size_t n, double* even,
                                  double* odd) {
  const size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const NormalPair z = box_muller(UniformPair{u0[i], u1[i]});
  even[i] = z.even;
  odd[i] = z.odd;
}

}  // namespace

void device_box_muller(const double* u0, const double* u1, size_t n, double* even, double* odd) {
  if (n == 0) return;
  const size_t bytes = n * sizeof(double);
  double* d = nullptr;  // u0, u1, even, odd, one after another
  PSCHED_CUDA_CHECK(cudaMalloc(&d, 4 * bytes));
  PSCHED_CUDA_CHECK(cudaMemcpy(d, u0, bytes, cudaMemcpyHostToDevice));
  PSCHED_CUDA_CHECK(cudaMemcpy(d + n, u1, bytes, cudaMemcpyHostToDevice));
  box_muller_kernel<<<unsigned((n + 255) / 256), 256>>>(d, d + n, n, d + 2 * n, d + 3 * n);
  PSCHED_CUDA_CHECK(cudaGetLastError());
  PSCHED_CUDA_CHECK(cudaMemcpy(even, d + 2 * n, bytes, cudaMemcpyDeviceToHost));
  PSCHED_CUDA_CHECK(cudaMemcpy(odd, d + 3 * n, bytes, cudaMemcpyDeviceToHost));
  PSCHED_CUDA_CHECK(cudaFree(d));
}

}  // namespace psched::gpu_test
