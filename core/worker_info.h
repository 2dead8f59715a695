// What a worker is: its device (which the backend reports), how many chunks it wants in flight,
// and the totals the scheduler keeps for it. The one definition behind the Hello a worker sends,
// the scheduler's WorkerRecord and the ClusterInfo a client reads; wire_convert.h converts it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/gpu_health.h"

namespace psched {

// The longest name a worker or client goes by (--name, ConnectOptions::name): the scheduler shows
// and logs names, and programs refuse a longer one at start, naming the option.
inline constexpr size_t kMaxPeerNameBytes = 128;

// The device a backend computes on, as Backend::info() reports it.
struct DeviceInfo {
  std::string backend;       // "cpu" or "cuda"
  std::string device_name;   // CPU model or GPU name
  uint64_t memory_total_bytes = 0;
  uint64_t memory_limit_bytes = 0;  // what the worker allows itself (0: no limit)
  uint32_t compute_major = 0, compute_minor = 0;  // GPUs only
  uint32_t threads = 0;
};

struct WorkerInfo : DeviceInfo {
  uint32_t id = 0;  // assigned by the scheduler (0 in the worker's Hello)
  std::string name, host;
  uint32_t pid = 0;
  uint32_t slots = 1;            // chunks in flight the worker asks for
  uint64_t window_elements = 0;  // ... and elements, when chunks are small (0: slots only)
  uint32_t readers = 0;          // stored-array chunks it reads at once, beside its slots
  // Filled by the scheduler from the worker's results.
  uint64_t chunks_done = 0;
  uint64_t bytes_reduced = 0;  // array bytes created + reduced
  double busy_seconds = 0;     // backend compute seconds, by the worker's own timings
  std::string cpu_affinity;    // CPUs the worker is pinned to ("0-15,32-47"; "": not pinned)
  std::optional<GpuHealth> gpu;  // the latest NVML health (scheduler: from heartbeats); none
                                 // without NVML
};

}  // namespace psched
