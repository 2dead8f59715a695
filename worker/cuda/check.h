// PSCHED_CUDA_CHECK: the one way the CUDA backend checks a CUDA runtime call. A failure throws a
// CudaError naming the call, the file and line, and CUDA's own description; the backend's threads
// catch it and turn it into a failed ChunkOutcome (or a Status at construction), so no exception
// leaves a thread. Includable by g++ and nvcc alike.
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime_api.h>

namespace psched {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// "cudaMalloc(&p, n) failed at worker/cuda/x.cpp:42: out of memory (cudaErrorMemoryAllocation)"
inline std::string describe_cuda_error(cudaError_t code, const char* call, const char* file,
                                       int line) {
  return std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
         cudaGetErrorString(code) + " (" + cudaGetErrorName(code) + ")";
}

// Errors after which the CUDA context is unusable until the process exits: every later call in it
// fails the same way (a kernel fault, a hardware error). A worker that sees one must exit, so that
// its supervisor (or systemd, Kubernetes) starts it again with a fresh context.
inline bool cuda_error_is_sticky(cudaError_t code) {
  switch (code) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call, const char* file,
                                          int line) {
  // Reset the thread's last-error state so a later cudaGetLastError() (the kernel-launch check)
  // does not report this failure a second time. Sticky errors stay, as they must.
  (void)cudaGetLastError();
  throw CudaError(code, describe_cuda_error(code, call, file, line));
}

}  // namespace psched

#define PSCHED_CUDA_CHECK(call)                                            \
  do {                                                                     \
    const cudaError_t psched_cuda_status_ = (call);                        \
    if (psched_cuda_status_ != cudaSuccess)                                \
      ::psched::throw_cuda_error(psched_cuda_status_, #call, __FILE__, __LINE__); \
  } while (0)
