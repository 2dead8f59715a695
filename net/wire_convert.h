// Conversions between the plain C++ types (JobSpec, PartialSum, WorkerInfo) and their wire forms in
// proto/psched.capnp. Reading from the wire never trusts the values: callers validate() after.
#pragma once

#include <string>
#include <vector>

#include "core/burn_status.h"
#include "core/exact_sum.h"
#include "core/job_spec.h"
#include "core/partial.h"
#include "core/worker_info.h"
#include "proto/psched.capnp.h"

namespace psched {

// The Hello every peer opens with (workers, clients, the load generator): its role, this build's
// protocol version, its name and the cluster token. A worker adds its WorkerInfo to the result.
wire::Hello::Builder init_hello(wire::Message::Builder message, wire::Role role, const std::string& name,
                                const std::string& token);

void to_wire(const JobSpec& spec, wire::JobSpec::Builder out);
JobSpec from_wire(wire::JobSpec::Reader in);
void to_wire(const StoredArray& array, wire::StoredArray::Builder out);
StoredArray from_wire(wire::StoredArray::Reader in);

// An exact sum as its terms() and special counts.
void to_wire(const ExactTerms& e, wire::ExactSum::Builder out);
void to_wire(const ExactSum& e, wire::ExactSum::Builder out);
ExactSum from_wire(wire::ExactSum::Reader in);
// Adds the message's exact sum (terms and specials) into `into`: in.getTerms().size() adds.
void add_from_wire(wire::ExactSum::Reader in, ExactSum& into);

// A chunk's partial; the sum sent is p.sum as given.
void to_wire(uint64_t chunk, const CompactPartial& p, wire::ChunkPartial::Builder out);
void to_wire(uint64_t chunk, const PartialSum& p, wire::ChunkPartial::Builder out);
// The partial as sent: `sum` is the sender's; receivers that combine partials use `exact`.
PartialSum from_wire(wire::ChunkPartial::Reader in);
// A job's result as a PartialSum (its exact sum rebuilt from the terms).
PartialSum from_wire(wire::JobResult::Reader in);

void to_wire(const GpuHealth& h, wire::GpuHealth::Builder out);
GpuHealth from_wire(wire::GpuHealth::Reader in);

void to_wire(const WorkerInfo& info, wire::WorkerInfo::Builder out);
WorkerInfo from_wire(wire::WorkerInfo::Reader in);

// The one reading of a wire GpuHealth, into ours or libpclient's pclient::GpuHealth (same names).
template <typename Health>
void read_gpu_health(wire::GpuHealth::Reader in, Health& h) {
  h.uuid = in.getUuid().cStr();
  h.pci_bus_id = in.getPciBusId().cStr();
  h.samples = in.getSamples();
  h.sm_utilisation_pct = in.getSmUtilisationPct();
  h.mem_utilisation_pct = in.getMemUtilisationPct();
  h.memory_used_bytes = in.getMemoryUsedBytes();
  h.memory_total_bytes = in.getMemoryTotalBytes();
  h.sm_clock_mhz = in.getSmClockMhz();
  h.sm_clock_min_mhz = in.getSmClockMinMhz();
  h.sm_clock_max_mhz = in.getSmClockMaxMhz();
  h.temperature_c = in.getTemperatureC();
  h.power_watts = in.getPowerWatts();
  h.power_limit_watts = in.getPowerLimitWatts();
  h.throttle_reasons = in.getThrottleReasons();
  h.ecc_corrected = in.getEccCorrected();
  h.ecc_uncorrected = in.getEccUncorrected();
  h.ecc_supported = in.getEccSupported();
  h.pcie_generation = in.getPcieGeneration();
  h.pcie_width = in.getPcieWidth();
  h.pcie_max_width = in.getPcieMaxWidth();
  h.pcie_max_generation = in.getPcieMaxGeneration();
  h.remap_supported = in.getRemapSupported();
  h.remapped_rows_corrected = in.getRemappedRowsCorrected();
  h.remapped_rows_uncorrected = in.getRemappedRowsUncorrected();
  h.remap_pending = in.getRemapPending();
  h.remap_failed = in.getRemapFailed();
  h.retired_supported = in.getRetiredSupported();
  h.retired_pages_sbe = in.getRetiredPagesSbe();
  h.retired_pages_dbe = in.getRetiredPagesDbe();
  h.retired_pending = in.getRetiredPending();
}

// The one reading of a wire WorkerInfo, into any struct with WorkerInfo's field names: ours, and
// libpclient's public pclient::WorkerInfo (which cannot include this header's types). A field the
// target lacks fails to compile, so neither can fall behind the wire.
template <typename Info>
void read_worker_info(wire::WorkerInfo::Reader in, Info& w) {
  w.id = in.getId();
  w.name = in.getName().cStr();
  w.host = in.getHost().cStr();
  w.pid = in.getPid();
  w.backend = in.getBackend().cStr();
  w.device_name = in.getDeviceName().cStr();
  w.memory_total_bytes = in.getMemoryTotalBytes();
  w.memory_limit_bytes = in.getMemoryLimitBytes();
  w.compute_major = in.getComputeMajor();
  w.compute_minor = in.getComputeMinor();
  w.threads = in.getThreads();
  w.slots = in.getSlots();
  w.readers = in.getReaders();
  w.window_elements = in.getWindowElements();
  w.chunks_done = in.getChunksDone();
  w.bytes_reduced = in.getBytesReduced();
  w.busy_seconds = in.getBusySeconds();
  w.cpu_affinity = in.getCpuAffinity().cStr();
  w.gpu.reset();
  if (in.hasGpu()) read_gpu_health(in.getGpu(), w.gpu.emplace());
}

// The one writing of a burn's state, from ours or libpclient's pclient::BurnStatus (same field
// names; its verdict enum lists pass, warn, fail in the wire's order).
template <typename Burn>
void write_burn_status(const Burn& b, wire::BurnStatus::Builder out) {
  out.setVerdict(static_cast<wire::BurnVerdict>(unsigned(b.verdict)));
  out.setElapsedSeconds(b.elapsed_seconds);
  out.setTotalSeconds(b.total_seconds);
  out.setEnded(b.ended);
  auto gpus = out.initGpus(unsigned(b.gpus.size()));
  for (unsigned i = 0; i < gpus.size(); ++i) {
    const auto& g = b.gpus[i];
    gpus[i].setWorker(g.worker);
    gpus[i].setVerdict(static_cast<wire::BurnVerdict>(unsigned(g.verdict)));
    gpus[i].setReason(g.reason);
    gpus[i].setBytesPerSecond(g.bytes_per_second);
    gpus[i].setChunks(g.chunks);
    gpus[i].setMismatches(g.mismatches);
    gpus[i].setGone(g.gone);
  }
}
// Read and validated (core/burn_status.h): a verdict the schema does not know, more GPUs than
// kMaxBurnGpus (checked before anything is copied) or what validate() refuses is an error.
StatusOr<BurnStatus> burn_status_from_wire(wire::BurnStatus::Reader in);

}  // namespace psched
