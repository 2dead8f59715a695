#include "worker/backend_factory.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

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

Result<std::unique_ptr<Backend>> make_backend(const BackendChoice& choice) {
  if (choice.kind != "auto" && choice.kind != "cpu" && choice.kind != "cuda")
    return Status::error(fmt::format("unknown backend '{}' (expected auto, cpu or cuda)", choice.kind));
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
  return make_cpu_backend(options);
}

Result<uint64_t> parse_bytes(const std::string& text) {
  auto bad = [&] {
    return Status::error(fmt::format(
        "invalid size '{}' (expected a number of bytes with an optional unit: 512MB, 8GiB, 0)", text));
  };
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return bad();
  }
  std::string unit = text.substr(pos);
  for (auto& c : unit) c = char(std::tolower(static_cast<unsigned char>(c)));
  double scale = 1;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb" || unit == "k") scale = 1e3;
  else if (unit == "mb" || unit == "m") scale = 1e6;
  else if (unit == "gb" || unit == "g") scale = 1e9;
  else if (unit == "tb" || unit == "t") scale = 1e12;
  else if (unit == "kib") scale = 1024.0;
  else if (unit == "mib") scale = 1048576.0;
  else if (unit == "gib") scale = 1073741824.0;
  else if (unit == "tib") scale = 1099511627776.0;
  else return bad();
  const double bytes = value * scale;
  if (!std::isfinite(bytes) || bytes < 0 || bytes > 1.8e19) return bad();
  return uint64_t(bytes);
}

}  // namespace psched
