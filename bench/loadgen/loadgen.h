// psched-loadgen's run: a simulated GPU fleet (sim_worker.h) registers with a real psched, is
// optionally held idle (what heartbeats cost), then simulated clients (sim_client.h) submit jobs
// whose results are checked bit for bit, while workers are optionally killed and replaced. Each
// phase prints its figures for a person, and "figure NAME VALUE" lines for scripts at the end.
#pragma once

#include "worker/cuda/batching.h"

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "core/job_spec.h"

namespace psched::loadgen {

struct LoadgenOptions {
  std::string scheduler;
  pid_t scheduler_pid = 0;
  uint32_t workers = 64;
  double element_ps = 6.7;  // 0.67 ms per 10000 x 10000 chunk (the H100, bench/README.md)
  uint32_t slots = 8;
  // As pcuda-worker's CUDA backend announces: a batch per slot.
  uint64_t window_elements = 8 * psched::gpu::kBatchTargetElements;
  int64_t corrupt_chunk = -1;
  int64_t crash_chunk = -1;
  uint32_t result_batch = 0;  // 0: as the CUDA backend, one ResultBatch per batch of chunks
  double idle_s = 0;
  uint32_t clients = 0, jobs = 1, outstanding = 1;
  double duration_s = 0;
  uint32_t churn_ms = 0;
  bool allow_failures = false;
  double ready_timeout_s = 120;
  JobSpec job;
  std::string generator = "constant";
  bool vary = true;
};

// Returns 0 when every result matched (and no job failed, unless allow_failures), 1 when one
// did not, 2 when the run could not start (address, fleet registration).
int run_loadgen(const LoadgenOptions& o);

}  // namespace psched::loadgen
