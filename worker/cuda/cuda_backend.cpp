// CudaBackend: the Backend behind pcuda-worker on a GPU. One dispatcher thread takes ChunkTasks
// from a queue and launches each on a free stream slot (generate, reduce, copy 24 bytes back); one
// completion thread waits for the slots' stop events in dispatch order, turns them into
// ChunkOutcomes and releases the slots. With several slots in flight, chunk k+1 is being created
// while chunk k is reduced. Nothing is allocated per chunk once a job's buffers exist
// (slot_pool.h).
#include "worker/cuda/cuda_backend.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/chunk_grid.h"
#include "worker/cuda/check.h"
#include "worker/cuda/kernels.cuh"
#include "worker/cuda/slot_pool.h"

namespace psched {
namespace {

using gpu::format_mib;
using gpu::SlotPool;
using gpu::StreamSlot;

// Left to the driver, other processes and CUB when no memory limit is given.
constexpr uint64_t kFreeMemoryReserve = uint64_t{256} << 20;
constexpr int kMaxStreams = 32;

// One dispatched task, finished by the completion thread in dispatch order.
struct InFlight {
  ChunkOutcome outcome;  // final unless launched
  int slot = -1;         // -1: nothing on the GPU
  int stop_event = 0;
  bool launched = false;  // false with a slot: the launch failed part way; drain the stream
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop,
              uint64_t budget_bytes);
  ~CudaBackend() override { stop(); }

  DeviceInfo info() const override { return info_; }
  int slots() const override { return options_.streams + 2; }
  void start(OnDone on_done) override;
  void enqueue(ChunkTask task) override;
  void drop_job(uint64_t job_id) override;
  void stop() override;
  uint64_t memory_used_bytes() const override;

 private:
  void dispatch_loop();
  InFlight dispatch(const ChunkTask& task);
  uint64_t temp_bytes_for(const gpu::ChunkWork& work);

  void complete_loop();
  void finish(InFlight& entry);
  double take_busy_ms(const StreamSlot& slot, cudaEvent_t stop);

  const CudaBackendOptions options_;
  DeviceInfo info_;
  int sm_count_ = 1;
  SlotPool pool_;

  // Dispatcher thread only.
  std::map<std::tuple<bool, int, int, uint64_t>, uint64_t> temp_bytes_cache_;

  // Completion thread only.
  cudaEvent_t latest_stop_ = nullptr;  // the latest chunk stop seen (take_busy_ms)

  OnDone on_done_;
  std::thread dispatcher_, completer_;

  std::mutex mutex_;  // guards everything below
  std::condition_variable dispatch_cv_;  // task queued, stopping
  std::condition_variable complete_cv_;  // entry in flight, dispatcher done
  std::deque<ChunkTask> queue_;
  std::deque<InFlight> in_flight_;
  bool started_ = false;
  bool stopping_ = false;
  bool stopped_ = false;
  bool dispatcher_done_ = true;
};

CudaBackend::CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop,
                         uint64_t budget_bytes)
    : options_(options), pool_(options.streams, budget_bytes) {
  info_.backend = "cuda";
  info_.device_name = prop.name;
  info_.memory_total_bytes = prop.totalGlobalMem;
  info_.memory_limit_bytes = options_.memory_limit_bytes;
  info_.compute_major = prop.major;
  info_.compute_minor = prop.minor;
  sm_count_ = std::max(prop.multiProcessorCount, 1);
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

// Device-wide memory in use (what nvidia-smi shows), so the dashboard sees other tenants too.
uint64_t CudaBackend::memory_used_bytes() const {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaSetDevice(options_.device) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return uint64_t(total_bytes - free_bytes);
}

void CudaBackend::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return;
    stopped_ = true;
    stopping_ = true;
    queue_.clear();
  }
  pool_.shut_down();
  dispatch_cv_.notify_all();
  complete_cv_.notify_all();
  if (dispatcher_.joinable()) dispatcher_.join();
  if (completer_.joinable()) completer_.join();  // it waits for whatever was launched
  if (cudaSetDevice(options_.device) != cudaSuccess) (void)cudaGetLastError();
  pool_.destroy();
}

// ---- dispatcher --------------------------------------------------------------------------------

void CudaBackend::dispatch_loop() {
  const cudaError_t device_status = cudaSetDevice(options_.device);
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
    if (device_status == cudaSuccess) {
      entry = dispatch(task);
    } else {
      entry.outcome.job_id = task.job_id;
      entry.outcome.chunk = task.chunk;
      entry.outcome.ok = false;
      entry.outcome.error =
          describe_cuda_error(device_status, "cudaSetDevice", __FILE__, __LINE__);
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
  auto fail = [&](std::string error) {
    entry.outcome.ok = false;
    entry.outcome.error = std::move(error);
    return entry;
  };
  try {
    const JobSpec& spec = *task.spec;
    const uint64_t chunks =
        ChunkGrid{spec.rows, spec.cols, spec.chunk_rows, spec.chunk_cols}.chunks();
    if (task.chunk >= chunks)
      return fail(fmt::format("chunk {} is out of range (the job has {} chunks)", task.chunk,
                              chunks));
    const gpu::ChunkWork work = gpu::chunk_work(spec, task.chunk);
    entry.outcome.partial.count = work.selected();
    if (work.selected() == 0) return entry;  // nothing selected here: the empty partial

    // Buffers are sized for the job's full chunk, so its edge chunks reuse them.
    const uint64_t buffer_bytes = work.fused ? 0 : spec.chunk_bytes();
    const uint64_t temp_bytes = temp_bytes_for(work);
    if (buffer_bytes + temp_bytes > pool_.budget_bytes())
      return fail(fmt::format("chunk of {} MiB does not fit in {} {} MiB",
                              format_mib(buffer_bytes + temp_bytes),
                              options_.memory_limit_bytes > 0 ? "memory limit"
                                                              : "free device memory",
                              format_mib(pool_.budget_bytes())));

    const int slot = pool_.claim(buffer_bytes, temp_bytes);
    if (slot < 0) return fail("cuda backend stopped");
    entry.slot = slot;  // from here on the completion thread releases it, whatever happens
    pool_.prepare(slot, buffer_bytes, temp_bytes);

    StreamSlot& s = pool_.slot(slot);
    entry.stop_event = s.next_stop;
    s.next_stop ^= 1;
    PSCHED_CUDA_CHECK(cudaEventRecord(s.start, s.stream));
    if (options_.test_trap_on_chunk >= 0 && task.chunk == uint64_t(options_.test_trap_on_chunk))
      gpu::launch_trap(s.stream);
    if (!work.fused) gpu::launch_generate(work, s.buffer, sm_count_, s.stream);
    gpu::launch_reduce(work, s.buffer, s.temp, s.temp_bytes, s.device_stats, s.stream);
    PSCHED_CUDA_CHECK(cudaMemcpyAsync(s.host_stats, s.device_stats, sizeof(gpu::SelectionStats),
                                      cudaMemcpyDeviceToHost, s.stream));
    PSCHED_CUDA_CHECK(cudaEventRecord(s.stop[entry.stop_event], s.stream));
    entry.launched = true;
  } catch (const CudaError& e) {
    fail(e.what());
    entry.outcome.device_lost = cuda_error_is_sticky(e.code());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return entry;
}

uint64_t CudaBackend::temp_bytes_for(const gpu::ChunkWork& work) {
  const auto key =
      std::make_tuple(work.fused, int(work.dtype), int(work.gen.kind), work.selected());
  if (auto it = temp_bytes_cache_.find(key); it != temp_bytes_cache_.end()) return it->second;
  if (temp_bytes_cache_.size() > 256) temp_bytes_cache_.clear();
  const uint64_t bytes = gpu::reduce_temp_bytes(work);
  temp_bytes_cache_.emplace(key, bytes);
  return bytes;
}

// ---- completion ------------------------------------------------------------------------------

void CudaBackend::complete_loop() {
  const cudaError_t device_status = cudaSetDevice(options_.device);
  if (device_status != cudaSuccess) {
    (void)cudaGetLastError();
    spdlog::error("cuda backend: cudaSetDevice({}) failed on the completion thread: {}",
                  options_.device, cudaGetErrorString(device_status));
  }
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) continue;  // drain the GPU, deliver nothing more
    }
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
  StreamSlot& s = pool_.slot(entry.slot);
  if (entry.launched) {
    const cudaEvent_t stop = s.stop[entry.stop_event];
    const cudaError_t status = cudaEventSynchronize(stop);
    if (status == cudaSuccess) {
      entry.outcome.partial.sum = s.host_stats->sum;
      entry.outcome.partial.min = s.host_stats->min;
      entry.outcome.partial.max = s.host_stats->max;
      entry.outcome.busy_seconds = take_busy_ms(s, stop) / 1e3;
    } else {
      (void)cudaGetLastError();
      entry.outcome.ok = false;
      entry.outcome.error =
          describe_cuda_error(status, "cudaEventSynchronize(chunk done)", __FILE__, __LINE__);
      entry.outcome.device_lost = cuda_error_is_sticky(status);
      latest_stop_ = nullptr;
    }
  } else {
    // The launch failed part way: let whatever reached the stream finish before reuse.
    if (cudaStreamSynchronize(s.stream) != cudaSuccess) (void)cudaGetLastError();
    latest_stop_ = nullptr;  // this slot's stop events may have been recorded out of turn
  }
  pool_.release(entry.slot);
}

// GPU time of this chunk not already counted for earlier chunks: from the later of its start and
// the latest stop seen so far, to its stop (0 when it ended before that latest stop: the streams
// overlap, and a chunk may finish before the one dispatched ahead of it). Each chunk adds at most
// what the latest stop advanced, so a worker's busy seconds never exceed the GPU's wall time.
// Moves latest_stop_ on. latest_stop_ is intact when read: its slot's next chunk (same stream) ends
// after it, and is finished (moving latest_stop_ on) before that slot can record this event again.
double CudaBackend::take_busy_ms(const StreamSlot& slot, cudaEvent_t stop) {
  float total = 0;
  if (cudaEventElapsedTime(&total, slot.start, stop) != cudaSuccess) {
    (void)cudaGetLastError();
    latest_stop_ = nullptr;
    return 0;
  }
  if (latest_stop_ != nullptr && latest_stop_ != stop) {
    float since_latest = 0;
    if (cudaEventElapsedTime(&since_latest, latest_stop_, stop) != cudaSuccess) {
      (void)cudaGetLastError();
    } else if (since_latest < 0) {
      return 0;  // all of it lies before the latest stop: counted already
    } else if (since_latest < total) {
      total = since_latest;
    }
  }
  latest_stop_ = stop;
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
    PSCHED_CUDA_CHECK(cudaSetDevice(options.device));
    cudaDeviceProp prop{};
    PSCHED_CUDA_CHECK(cudaGetDeviceProperties(&prop, options.device));
    size_t free_bytes = 0, total_bytes = 0;
    PSCHED_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    const uint64_t budget = options.memory_limit_bytes > 0 ? options.memory_limit_bytes
                            : free_bytes > kFreeMemoryReserve ? free_bytes - kFreeMemoryReserve
                                                              : 0;
    std::unique_ptr<Backend> backend = std::make_unique<CudaBackend>(options, prop, budget);
    return backend;
  } catch (const std::exception& e) {
    return Status::error(
        fmt::format("CUDA device {} cannot be used: {}", options.device, e.what()));
  }
}

}  // namespace psched
