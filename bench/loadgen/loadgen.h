// psched-loadgen's run: a simulated GPU fleet (sim_worker.h) registers with a real psched, is
// optionally held idle (what heartbeats cost), then simulated clients (sim_client.h) submit jobs
// whose results are checked bit for bit, while workers are optionally killed and replaced. Each
// phase prints its figures for a person, and "figure NAME VALUE" lines for scripts at the end. The
// load is cut into shards, a loop each with its part of the workers and clients: shard 0 on the
// calling thread, which also waits and measures, the others on threads of their own (by default
// one per CPU the process may run on: bench/lib/loadgen_run.sh pins it to the CPUs psched does not
// use, so on a machine with CPUs to spare the loadgen is not what a measurement measures).
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
  double chunk_ns = 0;  // host time per chunk, not reported as busy (DeviceModel::seconds_per_chunk)
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
  unsigned threads = 0;  // loops, each with its part of the workers and clients; 0: a loop per CPU it may use
  JobSpec job;
  std::string generator = "constant";
  bool vary = true;
  double verify = 0;  // Submit.verifyFraction of every job
};

// Returns 0 when every result matched (and no job failed, unless allow_failures), 1 when one
// did not, 2 when the run could not start (address, fleet registration).
int run_loadgen(const LoadgenOptions& o);

}  // namespace psched::loadgen
