// Conversions between the plain C++ types (JobSpec, PartialSum, WorkerInfo) and their wire forms in
// proto/psched.capnp. Reading from the wire never trusts the values: callers validate() after.
#pragma once

#include "common/job_spec.h"
#include "common/partial.h"
#include "common/worker_info.h"
#include "proto/psched.capnp.h"

namespace psched {

void to_wire(const JobSpec& spec, wire::JobSpec::Builder out);
JobSpec from_wire(wire::JobSpec::Reader in);

void to_wire(uint64_t chunk, const PartialSum& p, wire::ChunkPartial::Builder out);
PartialSum from_wire(wire::ChunkPartial::Reader in);

void to_wire(const WorkerInfo& info, wire::WorkerInfo::Builder out);
WorkerInfo from_wire(wire::WorkerInfo::Reader in);

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
  w.window_elements = in.getWindowElements();
  w.chunks_done = in.getChunksDone();
  w.bytes_reduced = in.getBytesReduced();
  w.busy_seconds = in.getBusySeconds();
}

}  // namespace psched
