// A worker and its GPU, and a worker's part in a job, as JSON: one set of keys wherever they are
// shown, psched's /api/status, pbench's --json, --report and --cluster-info, and the Python client's
// workers() and Result.devices. Templates over
// any struct with WorkerInfo's and GpuHealth's names, as wire_convert.h's readers are: ours (the
// scheduler's WorkerRecord) and libpclient's public pclient::WorkerInfo and pclient::GpuHealth,
// which cannot include this header's types. Each shower adds its own figures after these (psched:
// live rates and in-flight work; pbench: a run's share).
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/gpu_health.h"

namespace psched {

template <typename Health>
nlohmann::json gpu_health_json(const Health& h) {
  return {{"uuid", h.uuid},
          {"pci_bus_id", h.pci_bus_id},
          {"samples", h.samples},
          {"sm_utilisation_pct", h.sm_utilisation_pct},
          {"mem_utilisation_pct", h.mem_utilisation_pct},
          {"memory_used_bytes", h.memory_used_bytes},
          {"memory_total_bytes", h.memory_total_bytes},
          {"sm_clock_mhz", h.sm_clock_mhz},
          {"sm_clock_min_mhz", h.sm_clock_min_mhz},
          {"sm_clock_max_mhz", h.sm_clock_max_mhz},
          {"temperature_c", h.temperature_c},
          {"power_watts", h.power_watts},
          {"power_limit_watts", h.power_limit_watts},
          {"throttle_reasons", h.throttle_reasons},
          {"throttle", throttle_reason_names(h.throttle_reasons)},
          {"ecc_supported", h.ecc_supported},
          {"ecc_corrected", h.ecc_corrected},
          {"ecc_uncorrected", h.ecc_uncorrected},
          {"pcie_generation", h.pcie_generation},
          {"pcie_width", h.pcie_width},
          {"pcie_max_width", h.pcie_max_width},
          {"warnings", gpu_warnings(h)}};
}

// What a worker is and what it has done so far; "gpu" is null without NVML, "compute_capability"
// without a GPU.
template <typename Info>
nlohmann::json worker_info_json(const Info& w) {
  nlohmann::json j = {{"id", w.id},
                      {"name", w.name},
                      {"host", w.host},
                      {"pid", w.pid},
                      {"backend", w.backend},
                      {"device", w.device_name},
                      {"memory_total_bytes", w.memory_total_bytes},
                      {"memory_limit_bytes", w.memory_limit_bytes},
                      {"threads", w.threads},
                      {"slots", w.slots},
                      {"chunks_done", w.chunks_done},
                      {"bytes_reduced", w.bytes_reduced},
                      {"busy_seconds", w.busy_seconds},
                      {"cpu_affinity", w.cpu_affinity}};
  j["compute_capability"] = w.backend == "cuda"
                                ? nlohmann::json(fmt::format("{}.{}", w.compute_major, w.compute_minor))
                                : nlohmann::json(nullptr);
  j["gpu"] = w.gpu ? gpu_health_json(*w.gpu) : nlohmann::json(nullptr);
  return j;
}

// One segment of the task stream, [job, worker id, first chunk, chunks, start s, end s]: the shape
// the dashboard's and the report's lanes (app/task_lanes_js.h) draw, from psched's /api/task-stream
// and pbench's report timeline.
inline nlohmann::json task_segment_json(uint64_t job, uint64_t worker, uint64_t first_chunk, uint64_t chunks,
                                        double start_s, double end_s) {
  return nlohmann::json::array({job, worker, first_chunk, chunks, start_s, end_s});
}

// A worker's part in one job: /api/status's jobs[].devices (the scheduler's DeviceShare) and
// pbench's and Python's devices of a run (libpclient's DeviceReport, read from the JobResult the
// scheduler wrote from that DeviceShare). pbench adds the busy share and the GPU over the job.
template <typename Share>
nlohmann::json device_share_json(const Share& d) {
  return {{"worker_id", d.worker_id},
          {"worker", d.name},
          {"host", d.host},
          {"device", d.device},
          {"chunks", d.chunks},
          {"bytes", d.bytes},
          {"busy_seconds", d.busy_seconds},
          {"bytes_per_second", d.bytes_per_second},
          {"slow", d.slow},
          {"cause", d.cause}};
}

}  // namespace psched
