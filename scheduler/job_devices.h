// How each device did in each job: the chunks and bytes it reduced, the device time it took, and
// its GPU's figures while the job ran (min/mean/max of clock, temperature, power, utilisation).
// From these it names the job's stragglers: a device whose throughput (bytes per second of device
// time) is 10% or more below the job's median, with the cause NVML shows when it shows one.
// Kept for the running jobs and the last kJobsKept finished ones; fed by the Scheduler's loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/gpu_health.h"
#include "scheduler/job.h"

namespace psched {

struct DeviceShare {
  WorkerId worker_id = 0;
  std::string name, host, device;
  double parallelism = 1;  // device seconds per second the worker can give (CPU: threads)
  uint64_t chunks = 0, bytes = 0;
  double busy_seconds = 0;  // as the worker reported it
  double energy_joules = 0;  // its GPU's, as the worker reported it (0: no NVML)
  std::optional<GpuRunStats> gpu;
  // Filled by mark_stragglers().
  double bytes_per_second = 0;  // bytes / (busy_seconds / parallelism)
  bool slow = false;
  std::string cause;  // why, when NVML shows a reason ("" : none seen)
};

// A device is a straggler when its throughput is this far or more below its job's median.
constexpr double kStragglerShortfall = 0.10;

// Computes every share's throughput and marks the stragglers among them (none with fewer than two
// devices that did work).
void mark_stragglers(std::vector<DeviceShare>& shares);

class JobDevices {
 public:
  // The worker's share of the job, where its results add up; made on first use with only the
  // worker's id set (`fresh`: the caller names the worker).
  DeviceShare& share(JobId job, WorkerId worker, bool& fresh);
  // The worker's GPU health joins the figures of every running job it has worked on.
  // at_s: the scheduler's clock (seconds since it started).
  void add_health(WorkerId worker, const GpuHealth& health, double at_s);
  // The job ended: its figures stay (for reports and the dashboard) until kJobsKept newer ones.
  void finish(JobId job);
  // The job's devices with throughput and stragglers marked, by worker id; empty if unknown.
  std::vector<DeviceShare> shares(JobId job) const;
  // The workers that are stragglers in the newest job each worked on (one pass over every job).
  std::set<WorkerId> slow_workers() const;
  // The worker's GPU figures at each heartbeat during the job (scheduler clock); null if none.
  const std::vector<GpuPoint>* series(JobId job, WorkerId worker) const;

  static constexpr size_t kJobsKept = 64;

 private:
  struct Record {
    bool running = true;
    std::map<WorkerId, DeviceShare> devices;
    std::map<WorkerId, std::vector<GpuPoint>> series;  // apart: shares() stays cheap
  };
  std::map<JobId, Record> jobs_;  // running, then kept until kJobsKept newer ones finished
  std::deque<JobId> finished_;    // oldest first
};

}  // namespace psched
