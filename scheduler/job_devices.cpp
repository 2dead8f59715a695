#include "scheduler/job_devices.h"

#include <fmt/format.h>

#include <algorithm>

namespace psched {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// What NVML shows that makes this GPU slower than its peers: throttling, a lower SM clock than
// theirs, a PCIe link narrower than it can train to. "" when nothing stands out.
std::string slow_cause(const DeviceShare& d, double median_clock_mhz) {
  if (!d.gpu) return "";
  std::vector<std::string> why;
  if (const std::string t = throttle_reason_names(d.gpu->throttle_reasons); !t.empty())
    why.push_back("throttled: " + t);
  // 5%: boost clocks of healthy peers wander by a few percent.
  if (median_clock_mhz > 0 && d.gpu->sm_clock_mhz.mean() < 0.95 * median_clock_mhz)
    why.push_back(fmt::format("SM clock {:.0f} MHz vs median {:.0f} MHz", d.gpu->sm_clock_mhz.mean(),
                              median_clock_mhz));
  if (d.gpu->pcie_width > 0 && d.gpu->pcie_width < d.gpu->pcie_max_width)
    why.push_back(fmt::format("PCIe x{} of x{}", d.gpu->pcie_width, d.gpu->pcie_max_width));
  std::string out;
  for (const auto& w : why) out += (out.empty() ? "" : "; ") + w;
  return out;
}

}  // namespace

void mark_stragglers(std::vector<DeviceShare>& shares) {
  size_t working = 0;
  for (DeviceShare& d : shares) {
    const double device_seconds = d.busy_seconds / std::max(d.parallelism, 1.0);
    d.bytes_per_second = device_seconds > 0 ? double(d.bytes) / device_seconds : 0;
    d.slow = false;
    d.cause.clear();
    working += d.bytes_per_second > 0;
  }
  if (working < 2) return;  // nobody to compare with (most small jobs: no allocation)
  std::vector<double> rates, clocks;
  for (const DeviceShare& d : shares) {
    if (d.bytes_per_second > 0) rates.push_back(d.bytes_per_second);
    if (d.gpu && d.gpu->sm_clock_mhz.n > 0) clocks.push_back(d.gpu->sm_clock_mhz.mean());
  }
  const double m = median(rates);
  const double median_clock = clocks.empty() ? 0 : median(clocks);
  for (DeviceShare& d : shares) {
    if (d.bytes_per_second <= 0 || d.bytes_per_second > (1 - kStragglerShortfall) * m) continue;
    d.slow = true;
    d.cause = slow_cause(d, median_clock);
  }
}

DeviceShare& JobDevices::share(JobId job, WorkerId worker, bool& fresh) {
  auto [it, made] = jobs_[job].devices.try_emplace(worker);
  fresh = made;
  if (made) it->second.worker_id = worker;
  return it->second;
}

void JobDevices::add_health(WorkerId worker, const GpuHealth& health, double at_s) {
  for (auto& [job, record] : jobs_) {
    if (!record.running) continue;
    auto it = record.devices.find(worker);
    if (it == record.devices.end()) continue;
    if (!it->second.gpu) it->second.gpu.emplace();
    it->second.gpu->add(health);
    if (health.samples > 0)
      add_point(record.series[worker],
                GpuPoint{at_s, float(health.sm_clock_mhz), float(health.temperature_c),
                         float(health.power_watts), float(health.sm_utilisation_pct)});
  }
}

void JobDevices::finish(JobId job) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.running) return;
  it->second.running = false;
  finished_.push_back(job);
  while (finished_.size() > kJobsKept) {
    jobs_.erase(finished_.front());
    finished_.pop_front();
  }
}

std::vector<DeviceShare> JobDevices::shares(JobId job) const {
  std::vector<DeviceShare> out;
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  out.reserve(it->second.devices.size());
  for (const auto& [worker, d] : it->second.devices) out.push_back(d);
  mark_stragglers(out);
  return out;
}

std::set<WorkerId> JobDevices::slow_workers() const {
  std::set<WorkerId> seen, slow;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {  // newest job first
    bool fresh = false;
    for (const auto& [worker, d] : it->second.devices) fresh |= !seen.count(worker);
    if (!fresh) continue;
    for (const DeviceShare& d : shares(it->first)) {
      if (!seen.insert(d.worker_id).second) continue;
      if (d.slow) slow.insert(d.worker_id);
    }
  }
  return slow;
}

const std::vector<GpuPoint>* JobDevices::series(JobId job, WorkerId worker) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return nullptr;
  auto w = it->second.series.find(worker);
  return w == it->second.series.end() ? nullptr : &w->second;
}

}  // namespace psched
