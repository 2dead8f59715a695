// Backend: what computes chunks inside a pcuda-worker. The worker's connection hands it ChunkTasks
// and gets ChunkOutcomes back through a callback; the backend owns its threads (CPU) or streams (CUDA)
// and must never block the caller of enqueue(). Implementations: cpu/cpu_backend.h, cuda/cuda_backend.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/chunk_range.h"
#include "core/job_spec.h"
#include "core/partial.h"
#include "core/worker_info.h"

namespace psched {

struct ChunkTask {
  uint64_t job_id = 0;
  uint64_t chunk = 0;
  std::shared_ptr<const JobSpec> spec;  // validated and normalized
};

struct ChunkOutcome {
  uint64_t job_id = 0;
  uint64_t chunk = 0;
  uint64_t chunks = 1;  // chunks covered from `chunk` on: 1 from a backend (psched-loadgen's
                        // simulated devices report a run of alike chunks as one)
  bool ok = true;
  CompactPartial partial;  // the exact sum as terms: normalised and split once, on the backend
  std::string error;       // when !ok: one line saying what went wrong
  double busy_seconds = 0;  // compute time the backend spent on this chunk
  // The device is unusable from now on (a sticky CUDA error): the worker reports this outcome,
  // then leaves and exits non-zero so that it is restarted with a fresh device context.
  bool device_lost = false;
};

class Backend {
 public:
  // Outcomes as they finish, several at once where the backend has them together (a CUDA launch's
  // batch of chunks): the callee moves from them, and the backend reuses the vector. One call per
  // launch, not per chunk: 40000 chunks of 100² a job cost the worker's hand-over a lock each.
  using OnDone = std::function<void(std::vector<ChunkOutcome>& outcomes)>;

  virtual ~Backend() = default;
  virtual DeviceInfo info() const = 0;
  // How many chunks the backend wants in flight to stay busy (the worker's task window).
  virtual int slots() const = 0;
  // Elements the backend wants in flight when chunks are small: the scheduler widens the window
  // past slots() to cover this many elements (0: slots() only), so cheap chunks travel in batches
  // large enough to amortise a round trip.
  virtual uint64_t window_elements() const { return 0; }
  // Stored-array chunks the backend reads at once, each for as long as its read (and decompression)
  // takes: a stored job's window holds these beside slots() (0: slots() already cover them).
  virtual uint32_t readers() const { return 0; }
  // Called once before the first enqueue; on_done runs on a backend thread, never with none.
  virtual void start(OnDone on_done) = 0;
  // Thread-safe and non-blocking; every enqueued task yields exactly one outcome unless its job is
  // dropped or the backend stopped first.
  virtual void enqueue(ChunkTask task) = 0;
  // Chunks first .. first + count - 1 of one job, as `count` enqueue()s (a backend may take the run
  // under one lock).
  virtual void enqueue_run(uint64_t job_id, uint64_t first, uint64_t count,
                           const std::shared_ptr<const JobSpec>& spec) {
    for (uint64_t k = 0; k < count; ++k) enqueue(ChunkTask{job_id, first + k, spec});
  }
  // Forget the job's queued chunks (its running ones still report; the scheduler ignores them).
  virtual void drop_job(uint64_t job_id) = 0;
  // The job's chunks of first .. first + count - 1 that are queued, not started: removed (they
  // will yield no outcome) and returned, so that another worker can take them. Thread-safe.
  virtual std::vector<ChunkRange> give_back(uint64_t job_id, uint64_t first, uint64_t count) = 0;
  // Joins the backend's threads; queued tasks are discarded. Idempotent.
  virtual void stop() = 0;
  // Memory in use now, for heartbeats and the dashboard: device memory in use on the GPU (CUDA), the
  // process's resident memory (CPU). Called from the worker's event loop thread.
  virtual uint64_t memory_used_bytes() const = 0;
  // The GPU's PCI bus id ("00000000:3B:00.0"), by which NVML finds it (worker/nvml.h); "" for
  // backends without a GPU.
  virtual std::string pci_bus_id() const { return {}; }
};

}  // namespace psched
