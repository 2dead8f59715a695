// A worker and its GPU, and a worker's part in a job, as JSON: one set of keys wherever they are
// shown, psched's /api/status, pbench's --json, --report and --cluster-info, and the Python client's
// workers() and Result.devices; written once, to text or to a document (core/json_out.h).
// Templates over any struct with WorkerInfo's and GpuHealth's names, as wire_convert.h's readers
// are: ours (the scheduler's WorkerRecord) and libpclient's public pclient::WorkerInfo and
// pclient::GpuHealth, which cannot include this header's types. Each shower adds its own figures
// after these (psched: live rates and in-flight work; pbench: a run's share).
#pragma once

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/gpu_health.h"
#include "core/json_out.h"

namespace psched {

// A GPU's health as an object, written to `out` (core/json_out.h: text or a document).
template <typename Out, typename Health>
void write_gpu_health(Out& out, const Health& h) {
  out.begin_object();
  out.key("uuid").value(h.uuid);
  out.key("pci_bus_id").value(h.pci_bus_id);
  out.key("samples").value(h.samples);
  out.key("sm_utilisation_pct").value(h.sm_utilisation_pct);
  out.key("mem_utilisation_pct").value(h.mem_utilisation_pct);
  out.key("memory_used_bytes").value(h.memory_used_bytes);
  out.key("memory_total_bytes").value(h.memory_total_bytes);
  out.key("sm_clock_mhz").value(h.sm_clock_mhz);
  out.key("sm_clock_min_mhz").value(h.sm_clock_min_mhz);
  out.key("sm_clock_max_mhz").value(h.sm_clock_max_mhz);
  out.key("temperature_c").value(h.temperature_c);
  out.key("power_watts").value(h.power_watts);
  out.key("power_limit_watts").value(h.power_limit_watts);
  out.key("throttle_reasons").value(h.throttle_reasons);
  out.key("throttle").value(throttle_reason_names(h.throttle_reasons));
  out.key("ecc_supported").value(h.ecc_supported);
  out.key("ecc_corrected").value(h.ecc_corrected);
  out.key("ecc_uncorrected").value(h.ecc_uncorrected);
  out.key("pcie_generation").value(h.pcie_generation);
  out.key("pcie_width").value(h.pcie_width);
  out.key("pcie_max_width").value(h.pcie_max_width);
  out.key("pcie_max_generation").value(h.pcie_max_generation);
  out.key("remap_supported").value(h.remap_supported);
  out.key("remapped_rows_corrected").value(h.remapped_rows_corrected);
  out.key("remapped_rows_uncorrected").value(h.remapped_rows_uncorrected);
  out.key("remap_pending").value(h.remap_pending);
  out.key("remap_failed").value(h.remap_failed);
  out.key("retired_supported").value(h.retired_supported);
  out.key("retired_pages_sbe").value(h.retired_pages_sbe);
  out.key("retired_pages_dbe").value(h.retired_pages_dbe);
  out.key("retired_pending").value(h.retired_pending);
  out.key("warnings").value(gpu_warnings(h));
  out.end_object();
}

// What a worker is and what it has done so far, as members of the object `out` has open (each
// shower adds its own after them); "gpu" is null without NVML, "compute_capability" without a GPU.
template <typename Out, typename Info>
void write_worker_info_members(Out& out, const Info& w) {
  out.key("id").value(w.id);
  out.key("name").value(w.name);
  out.key("host").value(w.host);
  out.key("pid").value(w.pid);
  out.key("backend").value(w.backend);
  out.key("device").value(w.device_name);
  out.key("memory_total_bytes").value(w.memory_total_bytes);
  out.key("memory_limit_bytes").value(w.memory_limit_bytes);
  out.key("threads").value(w.threads);
  out.key("slots").value(w.slots);
  out.key("readers").value(w.readers);
  out.key("chunks_done").value(w.chunks_done);
  out.key("bytes_reduced").value(w.bytes_reduced);
  out.key("busy_seconds").value(w.busy_seconds);
  out.key("cpu_affinity").value(w.cpu_affinity);
  out.key("compute_capability");
  if (w.backend == "cuda") {
    out.value(fmt::format("{}.{}", w.compute_major, w.compute_minor));
  } else {
    out.null();
  }
  out.key("gpu");
  if (w.gpu) {
    write_gpu_health(out, *w.gpu);
  } else {
    out.null();
  }
}

template <typename Info>
nlohmann::json worker_info_json(const Info& w) {
  JsonDoc doc;
  doc.begin_object();
  write_worker_info_members(doc, w);
  doc.end_object();
  return doc.take();
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
// scheduler wrote from that DeviceShare). The job result (client/result_json.h) adds the busy
// share and the GPU over the job after these members.
template <typename Out, typename Share>
void write_device_share_members(Out& out, const Share& d) {
  out.key("worker_id").value(d.worker_id);
  out.key("worker").value(d.name);
  out.key("host").value(d.host);
  out.key("device").value(d.device);
  out.key("chunks").value(d.chunks);
  out.key("bytes").value(d.bytes);
  out.key("busy_seconds").value(d.busy_seconds);
  out.key("energy_joules").value(d.energy_joules);
  out.key("bytes_per_second").value(d.bytes_per_second);
  out.key("slow").value(d.slow);
  out.key("cause").value(d.cause);
}

template <typename Out, typename Share>
void write_device_share(Out& out, const Share& d) {
  out.begin_object();
  write_device_share_members(out, d);
  out.end_object();
}

}  // namespace psched
