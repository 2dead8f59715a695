#include "worker/backend_factory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>


#include "worker/cpu/cpu_backend.h"
#ifdef PSCHED_HAVE_CUDA
#include "worker/cuda/cuda_backend.h"
#endif

namespace psched {

std::string compiled_backends() {
#ifdef PSCHED_HAVE_CUDA
  return "cpu cuda";
#else
  return "cpu";
#endif
}

int usable_cuda_devices(std::string* why) {
#ifdef PSCHED_HAVE_CUDA
  return cuda_device_count(why);
#else
  if (why) *why = "this pcuda-worker was built without the CUDA backend";
  return 0;
#endif
}

StatusOr<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice) {
  if (choice.kind != "auto" && choice.kind != "cpu" && choice.kind != "cuda")
    return Status::invalid(fmt::format("unknown backend '{}' (expected auto, cpu or cuda)", choice.kind));
  if (choice.kind == "cuda" || choice.kind == "auto") {
    std::string why;
    const int devices = usable_cuda_devices(&why);
    if (devices > 0) {
#ifdef PSCHED_HAVE_CUDA
      CudaBackendOptions options;
      options.device = 0;
      options.memory_limit_bytes = choice.memory_limit_bytes;
      options.test_trap_on_chunk = choice.test_fault_on_chunk;
      if (choice.streams > 0) options.streams = choice.streams;
      if (choice.readers > 0) options.readers = unsigned(choice.readers);
      options.pinned_limit_bytes = choice.pinned_limit_bytes;
      options.register_limit_bytes = choice.register_limit_bytes;
      auto backend = make_cuda_backend(options);
      if (backend || choice.kind == "cuda") return backend;
      why = backend.message();
#endif
    }
    if (choice.kind == "cuda")
      return Status::error(fmt::format("--backend cuda: no usable GPU ({})", why));
    spdlog::warn("no usable GPU ({}); using the CPU backend", why);
  }
  CpuBackendOptions options;
  options.threads = choice.threads;
  options.memory_limit_bytes = choice.memory_limit_bytes;
  options.test_delay_ms = choice.test_delay_ms;
  options.spin = choice.spin;
  options.test_fault_on_chunk = choice.test_fault_on_chunk;
  if (choice.band_bytes != 0) options.band_bytes = choice.band_bytes;
  return make_cpu_backend(options);
}

}  // namespace psched
