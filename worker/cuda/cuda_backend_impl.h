// CudaBackend: the Backend behind pcuda-worker on a GPU. One dispatcher thread takes runs of chunks
// from a queue and launches each big chunk, or each batch of consecutive small chunks, on a free
// stream slot (generate, exact reduce, copy a 48-byte result per chunk back): cuda_dispatch.cpp.
// Stored arrays' chunks are also taken by more dispatchers, so that several are read at once. One completion
// thread waits for the slots' stop events in dispatch order, turns them into ChunkOutcomes and
// releases the slots: cuda_completion.cpp. With several slots in flight, one launch's chunks are
// being created while another's are reduced. Nothing is allocated per chunk once a job's buffers
// exist (slot_pool.h). Private to worker/cuda/; the worker sees cuda_backend.h only.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>

#include "worker/cuda/cuda_backend.h"
#include "worker/cuda/kernels.cuh"
#include "storage/chunk_reader.h"
#include "worker/cuda/registered_files.h"
#include "worker/cuda/slot_pool.h"
#include "worker/run_queue.h"

struct cudaDeviceProp;

namespace psched::gpu {

// Queued chunks as runs of one job (worker/run_queue.h): a TaskBatch's range is one entry.
using Run = QueuedRun<std::shared_ptr<const JobSpec>>;

// One dispatched launch (a big chunk, or a batch of small ones), finished by the completion thread
// in dispatch order.
struct Launch {
  std::vector<ChunkOutcome> outcomes;  // one per chunk; final unless launched
  std::shared_ptr<const JobSpec> spec;
  int slot = -1;         // -1: nothing on the GPU
  int stop_event = 0;
  bool launched = false;  // false with a slot: the launch failed part way; drain the stream
  // Stored 64-bit integers: what rounding them to doubles lost (storage/chunk_reader.h), added to
  // the chunk's exact sum once the device's part is in.
  std::unique_ptr<ExactSum> residual;
  // A chunk copied from a file's registered pages holds them until its copy is done.
  std::shared_ptr<RegisteredFile> source;
};

// The backend's life: created, running (threads started), stopping (stop() has begun), stopped.
enum class Life : uint8_t { kCreated, kRunning, kStopping, kStopped };

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop,
              uint64_t budget_bytes);
  ~CudaBackend() override { stop(); }

  DeviceInfo info() const override { return info_; }
  int slots() const override { return options_.streams + 2; }
  // Small chunks travel in batches: a window of a batch per slot.
  uint64_t window_elements() const override { return uint64_t(slots()) * kBatchTargetElements; }
  // Each dispatcher reads a stored chunk of its own (cuda_dispatch.cpp) before a slot copies it.
  uint32_t readers() const override { return dispatchers_; }
  void start(OnDone on_done) override;
  void enqueue(ChunkTask task) override { enqueue_run(task.job_id, task.chunk, 1, task.spec); }
  void enqueue_run(uint64_t job_id, uint64_t first, uint64_t count,
                   const std::shared_ptr<const JobSpec>& spec) override;
  void drop_job(uint64_t job_id) override;
  std::vector<ChunkRange> give_back(uint64_t job_id, uint64_t first, uint64_t count) override;
  void stop() override;
  uint64_t memory_used_bytes() const override;
  std::string pci_bus_id() const override { return pci_bus_id_; }

 private:
  void transition(Life to);  // mutex_ held
  // Nothing queued, read, copied or computed: the registry's time to register (registered_files.h).
  bool idle();
  uint64_t batch_chunks(const JobSpec& spec) const;

  // stored_only: one of the extra dispatchers, which take runs of stored arrays only.
  void dispatch_loop(bool stored_only);
  Launch launch(uint64_t job_id, uint64_t first, uint32_t count,
                const std::shared_ptr<const JobSpec>& spec, ChunkReader& reader);

  void complete_loop();
  void finish(Launch& entry);
  // A launch's accumulators copied back once one of its results is wide (fill_partial).
  struct WideCopies {
    std::vector<ChunkAccumulator> sums;
    std::vector<ExactSum> squares;
  };
  void fill_partial(const StreamSlot& slot, size_t i, size_t count, bool squares, WideCopies& wide,
                    CompactPartial& partial);
  double take_busy_ms(const StreamSlot& slot, cudaEvent_t stop);
  static void add_residual(ExactSum residual, CompactPartial& partial);

  const CudaBackendOptions options_;
  const unsigned dispatchers_;  // dispatcher threads: the readers of stored arrays, the first of them for all
  DeviceInfo info_;
  std::string pci_bus_id_;
  int sm_count_ = 1;
  SlotPool pool_;  // max(options_.streams, dispatchers_) slots
  FileRegistry registry_;  // stored files' pages registered with CUDA (after pool_: goes first)

  unsigned reader_threads_ = 1;  // threads of each dispatcher's ChunkReader
  // Held by a dispatcher while it claims and sizes a slot (SlotPool::claim and prepare), so that
  // the pool's memory is sized by one of them at a time.
  std::mutex claim_mutex_;

  // Completion thread only.
  cudaEvent_t latest_stop_ = nullptr;  // the latest chunk stop seen (take_busy_ms)

  OnDone on_done_;
  std::vector<std::thread> dispatcher_threads_;
  std::thread completer_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable dispatch_cv_;  // the first dispatcher: task queued, stopping
  // The other dispatchers: a stored array's run at the queue's front, stopping (apart, so that a
  // generated job's tasks wake one thread, not every reader).
  std::condition_variable readers_cv_;
  std::condition_variable complete_cv_;  // a launch dispatched, dispatcher done
  RunQueue<std::shared_ptr<const JobSpec>> queue_;
  std::deque<Launch> launches_;
  Life life_ = Life::kCreated;
  unsigned dispatchers_running_ = 0;  // dispatcher threads started and not yet finished
  unsigned runs_in_flight_ = 0;  // runs taken by a dispatcher whose launch the completer has not finished
};

}  // namespace psched::gpu
