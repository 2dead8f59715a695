#include "core/gpu_health.h"

#include <algorithm>

namespace psched {

std::string throttle_reason_names(uint64_t reasons) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {throttle::kSwPowerCap, "sw_power_cap"},
      {throttle::kHwSlowdown, "hw_slowdown"},
      {throttle::kSyncBoost, "sync_boost"},
      {throttle::kSwThermalSlowdown, "sw_thermal_slowdown"},
      {throttle::kHwThermalSlowdown, "hw_thermal_slowdown"},
      {throttle::kHwPowerBrakeSlowdown, "hw_power_brake"},
  };
  std::string out;
  for (const auto& [bit, name] : kNames)
    if (reasons & bit) {
      if (!out.empty()) out += ',';
      out += name;
    }
  return out;
}

void MinMeanMax::add(double v) {
  min = n ? std::min(min, v) : v;
  max = n ? std::max(max, v) : v;
  sum += v;
  ++n;
}

void add_point(std::vector<GpuPoint>& series, const GpuPoint& point) {
  if (series.size() >= kMaxGpuPoints) {
    for (size_t i = 0; i < series.size() / 2; ++i) series[i] = series[2 * i];
    series.resize(series.size() / 2);
  }
  series.push_back(point);
}

void GpuRunStats::add(const GpuHealth& h) {
  if (h.samples == 0) return;
  uuid = h.uuid;
  sm_clock_mhz.add(h.sm_clock_mhz);
  temperature_c.add(h.temperature_c);
  power_watts.add(h.power_watts);
  sm_utilisation_pct.add(h.sm_utilisation_pct);
  sm_clock_max_mhz = std::max(sm_clock_max_mhz, h.sm_clock_max_mhz);
  throttle_reasons |= h.throttle_reasons;
  if (h.pcie_width > 0) pcie_width = pcie_width ? std::min(pcie_width, h.pcie_width) : h.pcie_width;
  pcie_max_width = std::max(pcie_max_width, h.pcie_max_width);
}

}  // namespace psched
