// A GPU's health as NVML sees it (utilisation, memory, clocks, temperature, power, throttling, ECC,
// PCIe link), aggregated by the worker over a heartbeat's worth of samples (worker/nvml.h) and kept
// by the scheduler per worker. wire_convert.h converts it; GpuRunStats folds many into a run's
// min/mean/max for pbench's devices[] and the performance report.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace psched {

struct GpuHealth {
  std::string uuid;
  std::string pci_bus_id;
  uint32_t samples = 0;
  double sm_utilisation_pct = 0;   // mean
  double mem_utilisation_pct = 0;  // mean
  uint64_t memory_used_bytes = 0;  // at the last sample
  uint64_t memory_total_bytes = 0;
  double sm_clock_mhz = 0;         // mean
  uint32_t sm_clock_min_mhz = 0;   // lowest sampled
  uint32_t sm_clock_max_mhz = 0;   // the device's maximum
  uint32_t temperature_c = 0;      // highest sampled
  double power_watts = 0;          // mean
  double power_limit_watts = 0;
  uint64_t throttle_reasons = 0;   // NVML bits, OR over the samples
  uint64_t ecc_corrected = 0, ecc_uncorrected = 0;
  bool ecc_supported = false;
  uint32_t pcie_generation = 0, pcie_width = 0, pcie_max_width = 0;
  uint32_t pcie_max_generation = 0;  // the highest generation the link can train to (0: unknown)
  // Row remapping (Ampere on, nvmlDeviceGetRemappedRows): rows remapped for corrected and
  // uncorrected errors since manufacture, a remap waiting for a GPU reset, a remap that failed.
  // remap_supported false: NVML does not say (an older GPU, or no answer), so unknown, not healthy.
  bool remap_supported = false;
  uint32_t remapped_rows_corrected = 0, remapped_rows_uncorrected = 0;
  bool remap_pending = false, remap_failed = false;
  // Page retirement (before Ampere, nvmlDeviceGetRetiredPages): pages retired for repeated
  // single-bit and for double-bit ECC errors, a retirement waiting for the driver to reload.
  // retired_supported false: NVML does not say (Ampere on remaps rows instead), so unknown.
  bool retired_supported = false;
  uint32_t retired_pages_sbe = 0, retired_pages_dbe = 0;
  bool retired_pending = false;
};

// NVML's clock throttle reason bits (nvml.h, nvmlClocksThrottleReason*). Idle and the application
// clock setting are the GPU doing as told; the others slow a busy GPU down.
namespace throttle {
constexpr uint64_t kGpuIdle = 0x1;
constexpr uint64_t kApplicationsClocksSetting = 0x2;
constexpr uint64_t kSwPowerCap = 0x4;
constexpr uint64_t kHwSlowdown = 0x8;
constexpr uint64_t kSyncBoost = 0x10;
constexpr uint64_t kSwThermalSlowdown = 0x20;
constexpr uint64_t kHwThermalSlowdown = 0x40;
constexpr uint64_t kHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kDisplayClockSetting = 0x100;
// The reasons that mean "slower than it could be" while work runs.
constexpr uint64_t kSlowing = kSwPowerCap | kHwSlowdown | kSwThermalSlowdown | kHwThermalSlowdown |
                              kHwPowerBrakeSlowdown | kSyncBoost;
}  // namespace throttle

// "sw_power_cap,hw_thermal_slowdown" for the slowing bits set in `reasons` ("" when none).
std::string throttle_reason_names(uint64_t reasons);

// Warnings a person should see about one GPU, each a short phrase ("throttled: sw_power_cap",
// "ECC uncorrected 2", "PCIe x8 of x16", "hot 87 C", "memory 97% used"); empty when healthy. The
// one place that decides what is worth a warning: dashboard colours and pbench's text use it. Any
// struct with GpuHealth's names will do (libpclient's public pclient::GpuHealth too).
template <typename Health>
std::vector<std::string> gpu_warnings(const Health& h) {
  // Thresholds a datacentre GPU stays well inside when it is healthy: most slow down near 85-90 C
  // and a card that holds nearly all its memory is about to fail allocations.
  constexpr uint32_t kHotC = 85;
  constexpr double kMemoryFullShare = 0.95;
  std::vector<std::string> w;
  if (const std::string t = throttle_reason_names(h.throttle_reasons); !t.empty())
    w.push_back("throttled: " + t);
  if (h.ecc_supported && h.ecc_uncorrected > 0)
    w.push_back(fmt::format("ECC uncorrected {}", h.ecc_uncorrected));
  if (h.pcie_max_width > 0 && h.pcie_width > 0 && h.pcie_width < h.pcie_max_width)
    w.push_back(fmt::format("PCIe x{} of x{}", h.pcie_width, h.pcie_max_width));
  if (h.temperature_c >= kHotC) w.push_back(fmt::format("hot {} C", h.temperature_c));
  if (h.memory_total_bytes > 0 &&
      double(h.memory_used_bytes) >= kMemoryFullShare * double(h.memory_total_bytes))
    w.push_back(fmt::format("memory {:.0f}% used",
                            100.0 * double(h.memory_used_bytes) / double(h.memory_total_bytes)));
  return w;
}

// min / mean / max of one figure over a run.
struct MinMeanMax {
  double min = 0, max = 0, sum = 0;
  uint64_t n = 0;
  void add(double v);
  double mean() const { return n ? sum / double(n) : 0; }
};

// One heartbeat's figures at a time in a run, for charts.
struct GpuPoint {
  double at_s = 0;
  float sm_clock_mhz = 0, temperature_c = 0, power_watts = 0, sm_utilisation_pct = 0;
};

// A series keeps at most this many points: when full, every other one is dropped, so a long run
// keeps its whole span at a coarser step (memory per device and job stays ~12 kB).
constexpr size_t kMaxGpuPoints = 512;
void add_point(std::vector<GpuPoint>& series, const GpuPoint& point);

// A GPU's figures over a run, one add() per heartbeat's health.
struct GpuRunStats {
  std::string uuid;
  MinMeanMax sm_clock_mhz, temperature_c, power_watts, sm_utilisation_pct;
  uint32_t sm_clock_max_mhz = 0;
  uint64_t throttle_reasons = 0;        // OR over the run
  uint32_t pcie_width = 0, pcie_max_width = 0;  // the narrowest link seen, and its maximum
  void add(const GpuHealth& h);
};

}  // namespace psched
