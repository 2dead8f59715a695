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

}  // namespace psched
