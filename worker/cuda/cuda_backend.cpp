// CudaBackend: the Backend behind pcuda-worker on a GPU. One dispatcher thread takes ChunkTasks
// from a queue and launches each on a free stream slot (generate, then reduce, then copy 24 bytes
// back); one completion thread waits for the slots' events in dispatch order, turns them into
// ChunkOutcomes and frees the slots. With several slots in flight, chunk k+1 is being created while
// chunk k is reduced. Device memory is allocated per slot, grown only when a job's chunk is larger,
// and kept within the memory budget.
#include "worker/cuda/cuda_backend.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "worker/cuda/check.h"
#include "worker/cuda/kernels.cuh"

namespace psched {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
// Left to the driver, other processes and CUB's own needs when no limit is given.
constexpr uint64_t kFreeMemoryReserve = 256 * kMiB;
constexpr int kMaxStreams = 32;

std::string mib(uint64_t bytes) {
  const double v = double(bytes) / double(kMiB);
  return v < 100 ? fmt::format("{:.1f}", v) : fmt::format("{:.0f}", v);
}

// A CUDA stream with what one chunk in flight needs on it. Memory fields belong to the dispatcher
// thread; the completion thread uses only the stream, the events and the host result.
struct StreamSlot {
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr;
  // Two stop events used in turn, so the completion thread can still read the previous chunk's
  // stop time after its slot was handed out again (busy time without overlap, see finish()).
  cudaEvent_t stop[2] = {nullptr, nullptr};
  int next_stop = 0;
  void* buffer = nullptr;  // the materialized chunk
  uint64_t buffer_bytes = 0;
  void* temp = nullptr;  // CUB temporary storage
  uint64_t temp_bytes = 0;
  gpu::SelectionStats* device_stats = nullptr;
  gpu::SelectionStats* host_stats = nullptr;  // pinned

  uint64_t footprint() const { return buffer_bytes + temp_bytes; }
};

// One dispatched task, finished by the completion thread in dispatch order.
struct InFlight {
  ChunkOutcome outcome;  // final unless launched
  int slot = -1;         // -1: nothing on the GPU
  int stop_event = 0;
  bool launched = false;  // false with a slot: the launch failed part way; drain the stream
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options);
  ~CudaBackend() override { stop(); }

  DeviceInfo info() const override { return info_; }
  int slots() const override { return options_.streams + 2; }
  void start(OnDone on_done) override;
  void enqueue(ChunkTask task) override;
  void drop_job(uint64_t job_id) override;
  void stop() override;

 private:
  void create_slots();
  void release_slots() noexcept;

  void dispatch_loop();
  InFlight dispatch(const ChunkTask& task);
  uint64_t temp_bytes_for(const gpu::ChunkWork& work);
  int acquire_slot();
  void ensure_capacity(int slot, uint64_t buffer_bytes, uint64_t temp_bytes);
  bool release_idle_memory(int keep);
  void reallocate(void*& ptr, uint64_t& bytes, uint64_t want);

  void complete_loop();
  void finish(InFlight& entry);
  double busy_ms(const StreamSlot& slot, cudaEvent_t stop);

  const CudaBackendOptions options_;
  DeviceInfo info_;
  int sm_count_ = 1;
  uint64_t budget_bytes_ = 0;  // device memory the slots may hold together
  std::vector<StreamSlot> slots_;

  // Dispatcher thread only.
  uint64_t allocated_bytes_ = 0;
  std::map<std::tuple<bool, int, int, uint64_t>, uint64_t> temp_bytes_cache_;

  // Completion thread only.
  cudaEvent_t previous_stop_ = nullptr;

  OnDone on_done_;
  std::thread dispatcher_, completer_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable dispatch_cv_;  // tasks queued, slot freed, stopping
  std::condition_variable complete_cv_;  // entry in flight, dispatcher done
  std::deque<ChunkTask> queue_;
  std::vector<int> free_slots_;
  uint64_t slot_releases_ = 0;
  std::deque<InFlight> in_flight_;
  bool started_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  bool dispatcher_done_ = true;
};

CudaBackend::CudaBackend(const CudaBackendOptions& options) : options_(options) {
  PSCHED_CUDA_CHECK(cudaSetDevice(options_.device));
  cudaDeviceProp prop{};
  PSCHED_CUDA_CHECK(cudaGetDeviceProperties(&prop, options_.device));
  size_t free_bytes = 0, total_bytes = 0;
  PSCHED_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));

  info_.backend = "cuda";
  info_.device_name = prop.name;
  info_.memory_total_bytes = prop.totalGlobalMem;
  info_.memory_limit_bytes = options_.memory_limit_bytes;
  info_.compute_major = prop.major;
  info_.compute_minor = prop.minor;
  sm_count_ = std::max(prop.multiProcessorCount, 1);
  budget_bytes_ = options_.memory_limit_bytes > 0 ? options_.memory_limit_bytes
                  : free_bytes > kFreeMemoryReserve ? free_bytes - kFreeMemoryReserve
                                                    : 0;
  try {
    create_slots();
  } catch (...) {
    release_slots();
    throw;
  }
}

void CudaBackend::create_slots() {
  slots_.resize(size_t(options_.streams));
  for (size_t i = 0; i < slots_.size(); ++i) {
    StreamSlot& s = slots_[i];
    PSCHED_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    PSCHED_CUDA_CHECK(cudaEventCreateWithFlags(&s.start, cudaEventDefault));
    // Blocking sync: the completion thread sleeps in cudaEventSynchronize instead of spinning.
    for (cudaEvent_t& e : s.stop) PSCHED_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync));
    PSCHED_CUDA_CHECK(cudaMalloc(&s.device_stats, sizeof(gpu::SelectionStats)));
    PSCHED_CUDA_CHECK(cudaMallocHost(&s.host_stats, sizeof(gpu::SelectionStats)));
    free_slots_.push_back(int(i));
  }
}

// Frees everything the slots hold. Threads are joined (or never ran); errors are logged, not thrown,
// as this runs from the destructor.
void CudaBackend::release_slots() noexcept {
  auto check = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      spdlog::warn("cuda backend: {} failed while releasing: {}", what, cudaGetErrorString(e));
      (void)cudaGetLastError();
    }
  };
  check(cudaSetDevice(options_.device), "cudaSetDevice");
  for (StreamSlot& s : slots_) {
    if (s.stream) check(cudaStreamSynchronize(s.stream), "cudaStreamSynchronize");
    if (s.buffer) check(cudaFree(s.buffer), "cudaFree(buffer)");
    if (s.temp) check(cudaFree(s.temp), "cudaFree(temp)");
    if (s.device_stats) check(cudaFree(s.device_stats), "cudaFree(stats)");
    if (s.host_stats) check(cudaFreeHost(s.host_stats), "cudaFreeHost(stats)");
    for (cudaEvent_t e : s.stop)
      if (e) check(cudaEventDestroy(e), "cudaEventDestroy");
    if (s.start) check(cudaEventDestroy(s.start), "cudaEventDestroy");
    if (s.stream) check(cudaStreamDestroy(s.stream), "cudaStreamDestroy");
    s = StreamSlot{};
  }
  slots_.clear();
  allocated_bytes_ = 0;
}

void CudaBackend::start(OnDone on_done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (started_ || stopping_) return;
  started_ = true;
  on_done_ = std::move(on_done);
  dispatcher_done_ = false;
  dispatcher_ = std::thread([this] { dispatch_loop(); });
  completer_ = std::thread([this] { complete_loop(); });
}

void CudaBackend::enqueue(ChunkTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    queue_.push_back(std::move(task));
  }
  dispatch_cv_.notify_all();
}

void CudaBackend::drop_job(uint64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::erase_if(queue_, [&](const ChunkTask& t) { return t.job_id == job_id; });
}

void CudaBackend::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    queue_.clear();
  }
  dispatch_cv_.notify_all();
  complete_cv_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  if (completer_.joinable()) completer_.join();  // it drains what the dispatcher launched
  release_slots();
}

// ---- dispatcher --------------------------------------------------------------------------------

void CudaBackend::dispatch_loop() {
  cudaError_t device_status = cudaSetDevice(options_.device);
  while (true) {
    ChunkTask task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      dispatch_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    InFlight entry;
    if (device_status != cudaSuccess) {
      entry.outcome.job_id = task.job_id;
      entry.outcome.chunk = task.chunk;
      entry.outcome.ok = false;
      entry.outcome.error =
          describe_cuda_error(device_status, "cudaSetDevice", __FILE__, __LINE__);
    } else {
      entry = dispatch(task);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_flight_.push_back(std::move(entry));
    }
    complete_cv_.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dispatcher_done_ = true;
  }
  complete_cv_.notify_all();
}

InFlight CudaBackend::dispatch(const ChunkTask& task) {
  InFlight entry;
  entry.outcome.job_id = task.job_id;
  entry.outcome.chunk = task.chunk;
  try {
    const JobSpec& spec = *task.spec;
    const gpu::ChunkWork work = gpu::chunk_work(spec, task.chunk);
    entry.outcome.partial.count = work.selected();
    if (work.selected() == 0) return entry;  // nothing selected here: the empty partial

    // Buffers are sized for the job's full chunk, so its edge chunks reuse them.
    const uint64_t buffer_bytes = work.fused ? 0 : spec.chunk_bytes();
    const uint64_t temp_bytes = temp_bytes_for(work);
    if (buffer_bytes + temp_bytes > budget_bytes_) {
      entry.outcome.ok = false;
      entry.outcome.error = options_.memory_limit_bytes > 0
          ? fmt::format("chunk of {} MiB does not fit in memory limit {} MiB",
                        mib(buffer_bytes + temp_bytes), mib(budget_bytes_))
          : fmt::format("chunk of {} MiB does not fit in free device memory {} MiB",
                        mib(buffer_bytes + temp_bytes), mib(budget_bytes_));
      return entry;
    }

    const int slot = acquire_slot();
    if (slot < 0) {
      entry.outcome.ok = false;
      entry.outcome.error = "cuda backend stopped";
      return entry;
    }
    entry.slot = slot;
    ensure_capacity(slot, buffer_bytes, temp_bytes);

    StreamSlot& s = slots_[size_t(slot)];
    entry.stop_event = s.next_stop;
    s.next_stop ^= 1;
    PSCHED_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
    if (!work.fused) gpu::launch_generate(work, s.buffer, sm_count_, s.stream);
    gpu::launch_reduce(work, s.buffer, s.temp, s.temp_bytes, s.device_stats, s.stream);
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(s.host_stats, s.device_stats, sizeof(gpu::SelectionStats),
                                      cudaMemcpyDeviceToHost, s.stream));
    PSCHED_CUDA_CHECK(cudaEventRecord(s.stop[entry.stop_event], s.stream));
    entry.launched = true;
  } catch (const std::exception& e) {
    entry.outcome.ok = false;
    entry.outcome.error = e.what();
  }
  return entry;
}

uint64_t CudaBackend::temp_bytes_for(const gpu::ChunkWork& work) {
  const auto key = std::make_tuple(work.fused, int(work.dtype), int(work.gen.kind), work.selected());
  if (auto it = temp_bytes_cache_.find(key); it != temp_bytes_cache_.end()) return it->second;
  if (temp_bytes_cache_.size() > 256) temp_bytes_cache_.clear();
  const uint64_t bytes = gpu::reduce_temp_bytes(work);
  temp_bytes_cache_.emplace(key, bytes);
  return bytes;
}

// A free slot, waiting for one; -1 once stopping.
int CudaBackend::acquire_slot() {
  std::unique_lock<std::mutex> lock(mutex_);
  dispatch_cv_.wait(lock, [&] { return stopping_ || !free_slots_.empty(); });
  if (stopping_) return -1;
  // Prefer a slot whose buffers are already large: no allocation in steady state.
  auto best = std::max_element(free_slots_.begin(), free_slots_.end(), [&](int a, int b) {
    return slots_[size_t(a)].footprint() < slots_[size_t(b)].footprint();
  });
  const int slot = *best;
  free_slots_.erase(best);
  return slot;
}

// Gives the slot at least the given buffer and temp storage, freeing idle slots' memory and then
// waiting for busy slots when the budget is short. The caller checked the sizes fit the budget.
void CudaBackend::ensure_capacity(int slot, uint64_t buffer_bytes, uint64_t temp_bytes) {
  StreamSlot& s = slots_[size_t(slot)];
  if (s.buffer_bytes >= buffer_bytes && s.temp_bytes >= temp_bytes) return;
  // Keep what is larger than needed only while the budget allows it.
  uint64_t want_buffer = std::max(s.buffer_bytes, buffer_bytes);
  uint64_t want_temp = std::max(s.temp_bytes, temp_bytes);
  if (allocated_bytes_ - s.footprint() + want_buffer + want_temp > budget_bytes_) {
    want_buffer = buffer_bytes;
    want_temp = temp_bytes;
  }
  while (allocated_bytes_ - s.footprint() + want_buffer + want_temp > budget_bytes_) {
    if (release_idle_memory(slot)) continue;
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t seen = slot_releases_;
    dispatch_cv_.wait(lock, [&] { return stopping_ || slot_releases_ != seen; });
    if (stopping_) throw std::runtime_error("cuda backend stopped");
  }
  auto apply = [&] {
    if (s.buffer_bytes != want_buffer) reallocate(s.buffer, s.buffer_bytes, want_buffer);
    if (s.temp_bytes != want_temp) reallocate(s.temp, s.temp_bytes, want_temp);
  };
  try {
    apply();
  } catch (const CudaError& e) {
    // Memory taken by someone else since the budget was set: retry without our idle slots'.
    if (e.code() != cudaErrorMemoryAllocation || !release_idle_memory(slot)) throw;
    apply();
  }
}

// Frees the buffers of slots that are idle (free), except keep. True when it freed anything.
bool CudaBackend::release_idle_memory(int keep) {
  std::vector<int> idle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    idle = free_slots_;  // only this thread takes slots out of the free list
  }
  bool freed = false;
  for (int i : idle) {
    StreamSlot& s = slots_[size_t(i)];
    if (i == keep || s.footprint() == 0) continue;
    reallocate(s.buffer, s.buffer_bytes, 0);
    reallocate(s.temp, s.temp_bytes, 0);
    freed = true;
  }
  return freed;
}

// Replaces the allocation with one of exactly want bytes (0: none), keeping allocated_bytes_.
void CudaBackend::reallocate(void*& ptr, uint64_t& bytes, uint64_t want) {
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
                                        mib(want), cudaGetErrorString(status),
                                        mib(allocated_bytes_), mib(budget_bytes_)));
  }
  bytes = want;
  allocated_bytes_ += want;
}

// ---- completion ------------------------------------------------------------------------------

void CudaBackend::complete_loop() {
  const cudaError_t device_status = cudaSetDevice(options_.device);
  if (device_status != cudaSuccess)
    spdlog::error("cuda backend: cudaSetDevice({}) failed on the completion thread: {}",
                  options_.device, cudaGetErrorString(device_status));
  while (true) {
    InFlight entry;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      complete_cv_.wait(lock, [&] { return !in_flight_.empty() || dispatcher_done_; });
      if (in_flight_.empty()) break;
      entry = std::move(in_flight_.front());
      in_flight_.pop_front();
    }
    finish(entry);
    bool deliver = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      deliver = !stopping_;
    }
    if (!deliver) continue;
    try {
      on_done_(std::move(entry.outcome));
    } catch (const std::exception& e) {
      spdlog::error("cuda backend: on_done threw: {}", e.what());
    } catch (...) {
      spdlog::error("cuda backend: on_done threw");
    }
  }
}

// Waits for the entry's GPU work, fills in its outcome and hands its slot back.
void CudaBackend::finish(InFlight& entry) {
  if (entry.slot < 0) return;
  StreamSlot& s = slots_[size_t(entry.slot)];
  if (entry.launched) {
    const cudaEvent_t stop = s.stop[entry.stop_event];
    const cudaError_t status = cudaEventSynchronize(stop);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      entry.outcome.ok = false;
      entry.outcome.error = describe_cuda_error(status, "cudaEventSynchronize(chunk done)",
                                                __FILE__, __LINE__);
      previous_stop_ = nullptr;
    } else {
      entry.outcome.partial.sum = s.host_stats->sum;
      entry.outcome.partial.min = s.host_stats->min;
      entry.outcome.partial.max = s.host_stats->max;
      entry.outcome.busy_seconds = busy_ms(s, stop) / 1000.0;
      previous_stop_ = stop;
    }
  } else {
    // The launch failed part way: let whatever did reach the stream finish before reuse.
    if (cudaStreamSynchronize(s.stream) != cudaSuccess) (void)cudaGetLastError();
    previous_stop_ = nullptr;  // this slot's stop events may have been recorded out of turn
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_slots_.push_back(entry.slot);
    ++slot_releases_;
  }
  dispatch_cv_.notify_all();
}

// GPU time of this chunk not shared with the chunk finished before it: the streams overlap, and a
// chunk's start event fires as soon as it is queued, so start..stop alone would count time the GPU
// spent on other chunks. previous_stop_ is still intact: its slot cannot have been reused twice.
double CudaBackend::busy_ms(const StreamSlot& slot, cudaEvent_t stop) {
  float total = 0;
  if (cudaEventElapsedTime(&total, slot.start, stop) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (previous_stop_ != nullptr && previous_stop_ != stop) {
    float since_previous = 0;
    if (cudaEventElapsedTime(&since_previous, previous_stop_, stop) == cudaSuccess) {
      if (since_previous >= 0 && since_previous < total) total = since_previous;
    } else {
      (void)cudaGetLastError();
    }
  }
  return std::max(0.0, double(total));
}

}  // namespace

int cuda_device_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess && count > 0) return count;
  std::string reason;
  if (status == cudaSuccess || status == cudaErrorNoDevice) {
    reason = "no CUDA device";
  } else if (status == cudaErrorInsufficientDriver) {
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) {
      reason = "no CUDA driver";
    } else {
      reason = fmt::format("CUDA driver too old: it supports CUDA {}.{}, this build needs {}.{}",
                           driver / 1000, driver % 1000 / 10, CUDART_VERSION / 1000,
                           CUDART_VERSION % 1000 / 10);
    }
  } else {
    reason = fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
  }
  (void)cudaGetLastError();
  if (why) *why = reason;
  return 0;
}

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
  std::string why;
  const int devices = cuda_device_count(&why);
  if (devices == 0) return Status::error("no usable CUDA device: " + why);
  if (options.device < 0 || options.device >= devices)
    return Status::error(fmt::format("CUDA device must be in [0, {}) (got {})", devices,
                                     options.device));
  if (options.streams < 1 || options.streams > kMaxStreams)
    return Status::error(
        fmt::format("CUDA streams must be in [1, {}] (got {})", kMaxStreams, options.streams));
  try {
    std::unique_ptr<Backend> backend = std::make_unique<CudaBackend>(options);
    return backend;
  } catch (const std::exception& e) {
    return Status::error(fmt::format("CUDA device {} cannot be used: {}", options.device, e.what()));
  }
}

}  // namespace psched
