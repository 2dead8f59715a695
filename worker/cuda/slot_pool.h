// SlotPool: the CUDA backend's stream slots and who holds them. A slot is one CUDA stream with
// everything a chunk in flight needs on it (chunk buffer, the chunks' exact accumulators, their
// results in device and pinned host memory, events). A dispatcher thread claims a free slot for a
// chunk and sizes its memory (the backend lets one dispatcher at a time claim and prepare); the
// completion thread releases it once the chunk is done. Buffers are allocated when a job first
// needs them and kept, within the memory budget, so steady state allocates nothing.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "worker/cuda/kernels.cuh"

namespace psched::gpu {

struct StreamSlot {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  // Two stop events used in turn, so the previous chunk's stop time can still be read after its
  // slot was claimed again (the backend's busy-time accounting).
  cudaEvent_t stop[2] = {nullptr, nullptr};
  int next_stop = 0;
  void* buffer = nullptr;  // the materialized chunk
  uint64_t buffer_bytes = 0;
  // kMaxBatchChunks of each, allocated with the slot (4.7 MB of accumulators).
  ChunkAccumulator* accumulators = nullptr;  // device
  ChunkResult* device_results = nullptr;
  ChunkResult* host_results = nullptr;  // pinned
  // The same for a var/std job's squares, allocated when a job first asks for them (squares()).
  ExactSum* square_accumulators = nullptr;  // device
  CompactExact* device_square_results = nullptr;
  CompactExact* host_square_results = nullptr;  // pinned
  // Stored arrays: the chunk as read from its files, pinned, copied to `buffer` on the stream; or,
  // for a chunk of a flat file bigger than two pieces (kStagingPieceBytes), two pieces of it in
  // turn, each copied while the other is read (piece_copied[i]: piece i's last copy is done).
  void* host_staging = nullptr;
  uint64_t host_staging_bytes = 0;
  bool staging_registered = false;  // anonymous pages registered with CUDA, else cudaMallocHost's
  cudaEvent_t piece_copied[2] = {nullptr, nullptr};

  uint64_t footprint() const { return buffer_bytes; }
};

class SlotPool {
 public:
  // Creates the slots (streams, events, result storage; no buffers yet) on the current device.
  // Throws CudaError, having freed what it created.
  // pinned_limit_bytes: what the slots' staging (stored arrays' chunks as read) may pin in all.
  SlotPool(int slots, uint64_t budget_bytes, uint64_t pinned_limit_bytes = UINT64_MAX);
  ~SlotPool() { destroy(); }
  SlotPool(const SlotPool&) = delete;
  SlotPool& operator=(const SlotPool&) = delete;

  uint64_t budget_bytes() const { return budget_bytes_; }
  // The slot's stream, events and results; its memory fields belong to the dispatcher holding it.
  StreamSlot& slot(int index) { return slots_[size_t(index)]; }

  // A dispatcher, one at a time: a free slot for a chunk needing this buffer (which fits the budget),
  // waiting while none is free, `most_busy` slots are busy, or the budget is short; -1 once shut down.
  int claim(uint64_t buffer_bytes, size_t most_busy = SIZE_MAX);
  size_t size() const { return slots_.size(); }
  // The same dispatcher, after claim(): gives the slot at least this buffer. Throws CudaError.
  void prepare(int slot, uint64_t buffer_bytes);
  // The claiming dispatcher, after claim(): pinned host memory of at least this size for the slot's
  // chunk as read from storage (kept and reused; the slot's previous copy from it has completed).
  // Past the pinned limit, idle slots' staging is freed first. Throws CudaError.
  void* staging(int slot, uint64_t bytes);
  // Slots a stored array's chunks of this size may hold at once within the pinned limit (1 at least).
  size_t staging_slots(uint64_t bytes) const {
    const uint64_t fit = bytes > 0 ? pinned_limit_bytes_ / bytes : slots_.size();
    return size_t(std::clamp<uint64_t>(fit, 1, slots_.size()));
  }
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  // The slot's dispatcher, after claim(): the slot's room for squares (allocated on first use, then
  // kept). Throws CudaError.
  SquareOutput squares(int slot);
  // Completion thread: the slot's work is done (its stop event or stream synchronized).
  void release(int slot);
  // Wakes a waiting claim() and fails every later one.
  void shut_down();
  // Waits for every stream and frees everything; never throws (errors are logged).
  void destroy() noexcept;

 private:
  bool fits(const StreamSlot& s, uint64_t buffer_bytes) const {
    return allocated_bytes_ - s.footprint() + buffer_bytes <= budget_bytes_;
  }
  bool release_idle_memory(int keep);
  void resize(StreamSlot& s, uint64_t buffer_bytes);
  void reallocate(void*& ptr, uint64_t& bytes, uint64_t want);
  void free_staging(StreamSlot& s);

  std::vector<StreamSlot> slots_;
  const uint64_t budget_bytes_;
  uint64_t allocated_bytes_ = 0;  // the claiming dispatcher only
  const uint64_t pinned_limit_bytes_;
  uint64_t pinned_bytes_ = 0;  // the slots' staging; the claiming dispatcher only

  std::mutex mutex_;  // guards what follows
  std::condition_variable released_;
  std::vector<int> free_;
  uint64_t releases_ = 0;
  bool shut_down_ = false;
};

// "7.6" for 8000000 bytes, "763" for 800000000: MiB as the backend's messages print them.
std::string format_mib(uint64_t bytes);

}  // namespace psched::gpu
