// JobDefinition: a DefineJob as a worker keeps it. pcuda-worker (worker/worker_tasks.cpp) and
// psched-loadgen's simulated worker (bench/loadgen/sim_worker.cpp) read the message with this one
// function, so the simulator takes a job as the real worker does.
#pragma once

#include <cstdint>
#include <memory>

#include "core/job_spec.h"
#include "core/status.h"
#include "proto/psched.capnp.h"

namespace psched {

struct JobDefinition {
  uint64_t job_id = 0;
  std::shared_ptr<const JobSpec> spec;  // validated and normalized; null when not valid
  Status status;                        // not ok: why spec is null
  uint64_t partial_block = 0;           // DefineJob.partialBlock: where the job's partials are cut
};

JobDefinition read_job_definition(wire::DefineJob::Reader in);

}  // namespace psched
