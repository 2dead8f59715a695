#include "worker/cuda/slot_pool.h"

#include <sys/mman.h>

#include <algorithm>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/check.h"
#include "worker/cuda/check.h"

namespace psched::gpu {
namespace {

// Pinned host memory for a slot's staging. cudaMallocHost pins at about 2.5 GB/s on an H200 host
// whatever the thread, so a fresh worker's first stored job waited on it (16 readers' 80 MB Zarr
// chunks); anonymous pages the kernel makes resident (MAP_POPULATE) and CUDA then registers are
// pinned faster: that first job of an 8 GB Zarr store took 0.99-1.05 s against 1.12-1.41, of an
// 8 GB .npy 0.20 s against 0.23 (one H200, bench/README.md). cudaMallocHost where either is refused.
void* allocate_staging(uint64_t bytes, bool& registered) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p != MAP_FAILED) {
    if (cudaHostRegister(p, bytes, cudaHostRegisterDefault) == cudaSuccess) {
      registered = true;
      return p;
    }
    (void)cudaGetLastError();
    ::munmap(p, bytes);
  }
  registered = false;
  void* q = nullptr;
  PSCHED_CUDA_CHECK(cudaMallocHost(&q, bytes));
  return q;
}

cudaError_t free_staging_memory(void* p, uint64_t bytes, bool registered) {
  if (!registered) return cudaFreeHost(p);
  const cudaError_t e = cudaHostUnregister(p);
  ::munmap(p, bytes);
  return e;
}

void create_slot(StreamSlot& s) {
  PSCHED_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  PSCHED_CUDA_CHECK(cudaEventCreateWithFlags(&s.start, cudaEventDefault));
  // Blocking sync: the completion thread sleeps in cudaEventSynchronize instead of spinning.
  for (cudaEvent_t& e : s.stop)
    PSCHED_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync));
  for (cudaEvent_t& e : s.piece_copied)
    PSCHED_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming));
  // Room for the accumulators and results of the largest batch.
  PSCHED_CUDA_CHECK(cudaMalloc(&s.accumulators, sizeof(ChunkAccumulator) * kMaxBatchChunks));
  PSCHED_CUDA_CHECK(cudaMalloc(&s.device_results, sizeof(ChunkResult) * kMaxBatchChunks));
  PSCHED_CUDA_CHECK(cudaMallocHost(&s.host_results, sizeof(ChunkResult) * kMaxBatchChunks));
}

void destroy_slot(StreamSlot& s) noexcept {
  auto check = [](cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    try {
      spdlog::warn("cuda backend: {} failed while freeing a stream slot: {}", what,
                   cudaGetErrorString(e));
    } catch (...) {
    }
  };
  if (s.stream) check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
  if (s.buffer) check(cudaFree(s.buffer), "cudaFree(buffer)");
  if (s.accumulators) check(cudaFree(s.accumulators), "cudaFree(accumulators)");
  if (s.device_results) check(cudaFree(s.device_results), "cudaFree(results)");
  if (s.host_results) check(cudaFreeHost(s.host_results), "cudaFreeHost(results)");
  if (s.square_accumulators) check(cudaFree(s.square_accumulators), "cudaFree(square accumulators)");
  if (s.device_square_results) check(cudaFree(s.device_square_results), "cudaFree(square results)");
  if (s.host_square_results) check(cudaFreeHost(s.host_square_results), "cudaFreeHost(square results)");
  if (s.host_staging)
    check(free_staging_memory(s.host_staging, s.host_staging_bytes, s.staging_registered), "freeing the staging");
  for (cudaEvent_t e : s.stop)
    if (e) check(cudaEventDestroy(e), "cudaEventDestroy(stop)");
  for (cudaEvent_t e : s.piece_copied)
    if (e) check(cudaEventDestroy(e), "cudaEventDestroy(piece_copied)");
  if (s.start) check(cudaEventDestroy(s.start), "cudaEventDestroy(start)");
  if (s.stream) check(cudaStreamDestroy(s.stream), "cudaStreamDestroy");
  s = StreamSlot{};
}

}  // namespace

SlotPool::SlotPool(int slots, uint64_t budget_bytes, uint64_t pinned_limit_bytes)
    : slots_(size_t(std::max(slots, 0))), budget_bytes_(budget_bytes), pinned_limit_bytes_(pinned_limit_bytes) {
  try {
    for (size_t i = 0; i < slots_.size(); ++i) {
      create_slot(slots_[i]);
      free_.push_back(int(i));
    }
  } catch (...) {
    destroy();
    throw;
  }
}

// The slot returned either holds enough memory, or can grow within the budget, or every other slot
// holding memory is idle, so prepare() can free theirs. While the budget is short and a busy slot
// holds memory, this waits for that slot and reuses its buffer rather than free and reallocate.
int SlotPool::claim(uint64_t buffer_bytes, size_t most_busy) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    released_.wait(lock, [&] { return shut_down_ || (!free_.empty() && slots_.size() - free_.size() < most_busy); });
    if (shut_down_) return -1;
    // The free slot with the most memory: no allocation in steady state.
    auto best = std::max_element(free_.begin(), free_.end(), [&](int a, int b) {
      return slots_[size_t(a)].footprint() < slots_[size_t(b)].footprint();
    });
    const StreamSlot& s = slots_[size_t(*best)];
    const bool ready = s.buffer_bytes >= buffer_bytes || fits(s, buffer_bytes);
    bool busy_memory = false;
    for (size_t i = 0; i < slots_.size() && !ready; ++i) {
      const bool idle = std::find(free_.begin(), free_.end(), int(i)) != free_.end();
      busy_memory = busy_memory || (!idle && slots_[i].footprint() > 0);
    }
    if (ready || !busy_memory) {
      const int slot = *best;
      free_.erase(best);
      return slot;
    }
    const uint64_t seen = releases_;
    released_.wait(lock, [&] { return shut_down_ || releases_ != seen; });
  }
}

void SlotPool::prepare(int slot, uint64_t buffer_bytes) {
  StreamSlot& s = slots_[size_t(slot)];
  if (s.buffer_bytes >= buffer_bytes) return;
  if (!fits(s, buffer_bytes)) release_idle_memory(slot);
  // claim() promised the buffer fits the budget beside what the other slots hold.
  PSCHED_ASSERT(fits(s, buffer_bytes), format_mib(buffer_bytes), format_mib(budget_bytes_),
                format_mib(allocated_bytes_ - s.footprint()));
  try {
    resize(s, buffer_bytes);
  } catch (const CudaError& e) {
    // Memory taken by someone else since the budget was set: retry without our idle slots'.
    if (e.code() != cudaErrorMemoryAllocation || !release_idle_memory(slot)) throw;
    resize(s, buffer_bytes);
  }
}

void* SlotPool::staging(int slot, uint64_t bytes) {
  StreamSlot& s = slots_[size_t(slot)];
  if (s.host_staging_bytes < bytes) {
    free_staging(s);
    if (pinned_bytes_ + bytes > pinned_limit_bytes_) {  // idle slots' first (claimed one at a time)
      std::vector<int> idle;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        idle = free_;
      }
      for (int i : idle) free_staging(slots_[size_t(i)]);
    }
    s.host_staging = allocate_staging(bytes, s.staging_registered);
    s.host_staging_bytes = bytes;
    pinned_bytes_ += bytes;
  }
  return s.host_staging;
}

void SlotPool::free_staging(StreamSlot& s) {
  if (s.host_staging) PSCHED_CUDA_CHECK(free_staging_memory(s.host_staging, s.host_staging_bytes, s.staging_registered));
  s.host_staging = nullptr;
  pinned_bytes_ -= s.host_staging_bytes;
  s.host_staging_bytes = 0;
}

SquareOutput SlotPool::squares(int slot) {
  StreamSlot& s = slots_[size_t(slot)];
  if (s.square_accumulators == nullptr)
    PSCHED_CUDA_CHECK(cudaMalloc(&s.square_accumulators, sizeof(ExactSum) * kMaxBatchChunks));
  if (s.device_square_results == nullptr)
    PSCHED_CUDA_CHECK(cudaMalloc(&s.device_square_results, sizeof(CompactExact) * kMaxBatchChunks));
  if (s.host_square_results == nullptr)
    PSCHED_CUDA_CHECK(cudaMallocHost(&s.host_square_results, sizeof(CompactExact) * kMaxBatchChunks));
  return SquareOutput{s.square_accumulators, s.device_square_results};
}

void SlotPool::release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
    ++releases_;
  }
  released_.notify_all();
}

void SlotPool::shut_down() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
  }
  released_.notify_all();
}

void SlotPool::destroy() noexcept {
  for (StreamSlot& s : slots_) destroy_slot(s);
  allocated_bytes_ = 0;
  pinned_bytes_ = 0;
}

// Frees the memory of idle slots other than keep. True when it freed anything.
bool SlotPool::release_idle_memory(int keep) {
  std::vector<int> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle = free_;  // slots are claimed one dispatcher at a time, and this is the one
  }
  bool freed = false;
  for (int i : idle) {
    StreamSlot& s = slots_[size_t(i)];
    if (i == keep || s.footprint() == 0) continue;
    resize(s, 0);
    freed = true;
  }
  return freed;
}

void SlotPool::resize(StreamSlot& s, uint64_t buffer_bytes) {
  if (s.buffer_bytes != buffer_bytes) reallocate(s.buffer, s.buffer_bytes, buffer_bytes);
}

// Replaces the allocation with one of exactly want bytes (0: none). The slot is idle (its last
// chunk completed), so the old memory can go at once.
void SlotPool::reallocate(void*& ptr, uint64_t& bytes, uint64_t want) {
  if (ptr) {
    PSCHED_CUDA_CHECK(cudaFree(ptr));
    ptr = nullptr;
    allocated_bytes_ -= bytes;
    bytes = 0;
  }
  if (want == 0) return;
  const cudaError_t status = cudaMalloc(&ptr, want);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    ptr = nullptr;
    throw CudaError(status, fmt::format("cudaMalloc of {} MiB failed: {} ({} MiB held by this "
                                        "backend, budget {} MiB)",
                                        format_mib(want), cudaGetErrorString(status),
                                        format_mib(allocated_bytes_), format_mib(budget_bytes_)));
  }
  bytes = want;
  allocated_bytes_ += want;
}

std::string format_mib(uint64_t bytes) {
  const double mib = double(bytes) / double(uint64_t{1} << 20);
  return mib < 100 ? fmt::format("{:.1f}", mib) : fmt::format("{:.0f}", mib);
}

}  // namespace psched::gpu
