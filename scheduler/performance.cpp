// What the scheduler records of how its devices do: the GPU health workers send in heartbeats,
// the task stream (one segment per ResultBatch), each job's devices and stragglers, and the report
// of them a JobResult carries to pbench.
#include <algorithm>
#include <cmath>

#include "app/logging.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

double Scheduler::seconds_since_start() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void Scheduler::on_gpu_health(WorkerRecord& worker, wire::GpuHealth::Reader in) {
  GpuHealth h = from_wire(in);
  // Peer-supplied text is shown on the dashboard and in metric labels.
  h.uuid = printable(h.uuid, 96);
  h.pci_bus_id = printable(h.pci_bus_id, 32);
  // A worker's own figures: a NaN or infinity would poison every mean it joins.
  for (double* v : {&h.sm_utilisation_pct, &h.mem_utilisation_pct, &h.sm_clock_mhz,
                    &h.power_watts, &h.power_limit_watts})
    if (!std::isfinite(*v) || *v < 0) *v = 0;
  job_devices_.add_health(worker.id, h, seconds_since_start());
  worker.gpu = std::move(h);
}

void Scheduler::observe_results(WorkerRecord& worker, const Job& job, uint64_t finished,
                                uint64_t first_chunk, double busy_seconds, double energy_joules) {
  if (finished == 0) return;
  const double end = seconds_since_start();
  const double device_seconds = busy_seconds / std::max(parallelism(worker), 1.0);
  task_stream_.record(TaskSegment{job.id(), worker.id, first_chunk, uint32_t(finished),
                                  std::max(0.0, end - device_seconds), end});
  bool fresh = false;
  DeviceShare& share = job_devices_.share(job.id(), worker.id, fresh);
  if (fresh) {
    share.name = worker.name;
    share.host = worker.host;
    share.device = worker.device_name;
    share.parallelism = std::max(parallelism(worker), 1.0);
  }
  share.chunks += finished;
  share.bytes += finished * job.spec()->chunk_bytes();
  share.busy_seconds += busy_seconds;
  share.energy_joules += energy_joules;
}

namespace {

void to_wire(const MinMeanMax& m, wire::MinMeanMax::Builder out) {
  out.setMin(m.min);
  out.setMean(m.mean());
  out.setMax(m.max);
}

}  // namespace

void Scheduler::report_devices(const Job& job, wire::JobResult::Builder result) const {
  const std::vector<DeviceShare> shares = job_devices_.shares(job.id());
  const double accepted = seconds_since_start() - job.seconds();  // the job's clock starts here
  auto list = result.initDevices(uint32_t(shares.size()));
  for (size_t i = 0; i < shares.size(); ++i) {
    const DeviceShare& d = shares[i];
    auto out = list[uint32_t(i)];
    out.setWorkerId(d.worker_id);
    out.setName(d.name);
    out.setHost(d.host);
    out.setDevice(d.device);
    out.setChunks(d.chunks);
    out.setBytes(d.bytes);
    out.setBusySeconds(d.busy_seconds);
    out.setEnergyJoules(d.energy_joules);
    out.setBytesPerSecond(d.bytes_per_second);
    out.setSlow(d.slow);
    out.setCause(d.cause);
    out.setHasGpu(d.gpu.has_value() && d.gpu->sm_clock_mhz.n > 0);
    if (d.gpu) {
      to_wire(d.gpu->sm_clock_mhz, out.initSmClockMhz());
      out.setSmClockMaxMhz(d.gpu->sm_clock_max_mhz);
      to_wire(d.gpu->temperature_c, out.initTemperatureC());
      to_wire(d.gpu->power_watts, out.initPowerWatts());
      to_wire(d.gpu->sm_utilisation_pct, out.initSmUtilisationPct());
      out.setThrottleReasons(d.gpu->throttle_reasons);
      out.setUuid(d.gpu->uuid);
    }
    if (const std::vector<GpuPoint>* points = job_devices_.series(job.id(), d.worker_id)) {
      auto series = out.initSeries(uint32_t(points->size()));
      for (size_t k = 0; k < points->size(); ++k) {
        const GpuPoint& p = (*points)[k];
        auto o = series[uint32_t(k)];
        o.setSeconds(std::max(0.0, p.at_s - accepted));
        o.setSmClockMhz(p.sm_clock_mhz);
        o.setTemperatureC(p.temperature_c);
        o.setPowerWatts(p.power_watts);
        o.setSmUtilisationPct(p.sm_utilisation_pct);
      }
    }
  }
  if (!want_timeline_.count(job.id())) return;
  // The job's segments, on the job's clock. Bounded by the task stream.
  const std::vector<TaskSegment> segments =
      task_stream_.since(accepted, task_stream_.capacity(), job.id());
  auto timeline = result.initTimeline(uint32_t(segments.size()));
  for (size_t i = 0; i < segments.size(); ++i) {
    auto out = timeline[uint32_t(i)];
    out.setWorkerId(segments[i].worker);
    out.setFirstChunk(segments[i].first_chunk);
    out.setChunks(segments[i].chunks);
    out.setStartSeconds(std::max(0.0, segments[i].start_s - accepted));
    out.setEndSeconds(std::max(0.0, segments[i].end_s - accepted));
  }
}

}  // namespace psched
