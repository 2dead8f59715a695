// Choosing a backend from --backend auto|cpu|cuda: cuda where a device is usable, cpu otherwise
// (auto says so in one warning line; an explicit cuda without a device is an error).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "worker/backend.h"

namespace psched {

struct BackendChoice {
  std::string kind = "auto";  // auto, cpu, cuda
  int threads = 0;            // cpu threads; 0 = one per core
  int streams = 0;            // cuda stream slots; 0 = the backend's default
  int readers = 0;            // cuda: stored chunks read at once; 0 = the backend's default
  uint64_t pinned_limit_bytes = 0;  // cuda: pinned host memory for stored chunks; 0 = the default
  // cuda: stored files' pages registered with CUDA at once; 0 = none, UINT64_MAX = the default
  uint64_t register_limit_bytes = UINT64_MAX;
  uint64_t memory_limit_bytes = 0;
  int test_delay_ms = 0;  // test-only, CPU backend
  std::chrono::microseconds spin{0};  // CPU backend threads poll this long before sleeping
  int64_t test_fault_on_chunk = -1;    // test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK)
  // CPU backend: CpuBackendOptions::band_bytes; 0 = its default (test only: PSCHED_TEST_BAND_BYTES,
  // so that small files are shared in bands as big ones are)
  uint64_t band_bytes = 0;
};

// "cpu cuda" or "cpu": what this binary was built with.
std::string compiled_backends();
// Usable CUDA devices (0 when the CUDA backend is not compiled in); *why says why there are none.
int usable_cuda_devices(std::string* why);

StatusOr<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice);

}  // namespace psched
