#include "worker/cuda/cuda_backend.h"

#include <algorithm>
#include <thread>
#include <cstdlib>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/check.h"
#include "core/chunk_grid.h"
#include "core/reader_share.h"
#include "worker/cuda/check.h"
#include "worker/cuda/cuda_backend_impl.h"

namespace psched {
namespace {

// Left to the driver, other processes and the slots' fixed result storage (~5 MB each) when no
// memory limit is given.
constexpr uint64_t kFreeMemoryReserve = uint64_t{256} << 20;
constexpr int kMaxStreams = 32;

// Every core, 4 to 32: the stored arrays' reading threads by default.
unsigned every_core() { return std::clamp(std::thread::hardware_concurrency(), 4u, 32u); }

uint64_t pinned_limit_of(const CudaBackendOptions& options) {
  if (options.pinned_limit_bytes != 0) return options.pinned_limit_bytes;
  const uint64_t memory = host_memory_bytes();
  return memory > 0 ? memory / 8 : uint64_t{4} << 30;
}

uint64_t register_limit_of(const CudaBackendOptions& options) {
  return options.register_limit_bytes != UINT64_MAX ? options.register_limit_bytes : register_limit_per_gpu(1);
}

unsigned readers_of(const CudaBackendOptions& options) {
  return options.readers != 0 ? std::min(options.readers, unsigned(kMaxStreams)) : readers_per_gpu(1);
}

}  // namespace

namespace gpu {

CudaBackend::CudaBackend(const CudaBackendOptions& options, const cudaDeviceProp& prop,
                         uint64_t budget_bytes)
    : options_(options),
      dispatchers_(readers_of(options)),
      pool_(std::max(options.streams, int(dispatchers_)), budget_bytes, pinned_limit_of(options)),
      registry_(options.device, register_limit_of(options),
                [this] { return idle(); },
                options.test_register_at_once ? FileRegistry::Mode::kAtOnce : FileRegistry::Mode::kBackground,
                options.test_register_block_bytes != 0 ? options.test_register_block_bytes : kRegisterBlockBytes) {
  info_.backend = "cuda";
  info_.device_name = prop.name;
  info_.memory_total_bytes = prop.totalGlobalMem;
  info_.memory_limit_bytes = options_.memory_limit_bytes;
  info_.compute_major = prop.major;
  info_.compute_minor = prop.minor;
  sm_count_ = std::max(prop.multiProcessorCount, 1);
  const unsigned read_threads = options_.read_threads != 0 ? options_.read_threads : every_core();
  reader_threads_ = std::max(1u, read_threads / dispatchers_);
  // NVML's spelling of the bus id (function 0: a GPU is always function 0).
  pci_bus_id_ = fmt::format("{:08X}:{:02X}:{:02X}.0", unsigned(prop.pciDomainID),
                            unsigned(prop.pciBusID), unsigned(prop.pciDeviceID));
}

// The only place life_ changes: forward only (created -> running -> stopping -> stopped, or
// created -> stopping).
void CudaBackend::transition(Life to) {
  PSCHED_ASSERT(uint8_t(to) > uint8_t(life_) && !(life_ == Life::kCreated && to == Life::kStopped), int(life_),
                int(to));
  life_ = to;
}

bool CudaBackend::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.empty() && runs_in_flight_ == 0;
}

void CudaBackend::start(OnDone on_done) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (life_ != Life::kCreated) return;
  transition(Life::kRunning);
  on_done_ = std::move(on_done);
  dispatchers_running_ = dispatchers_;
  for (unsigned i = 0; i < dispatchers_; ++i)
    dispatcher_threads_.emplace_back([this, i] { dispatch_loop(/*stored_only=*/i > 0); });
  completer_ = std::thread([this] { complete_loop(); });
}

void CudaBackend::enqueue_run(uint64_t job_id, uint64_t first, uint64_t count,
                              const std::shared_ptr<const JobSpec>& spec) {
  if (count == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (life_ >= Life::kStopping) return;
    // Runs the scheduler sent in separate batches join up again, so batches stay full.
    queue_.push(job_id, first, count, spec, JoinRuns::kAdjacent);
  }
  dispatch_cv_.notify_one();
  if (spec->stored.stored() && dispatchers_ > 1) readers_cv_.notify_all();
}

void CudaBackend::drop_job(uint64_t job_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.drop_job(job_id);
}

std::vector<ChunkRange> CudaBackend::give_back(uint64_t job_id, uint64_t first, uint64_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  return queue_.give_back(job_id, first, count, HeadStarted::kNo);
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
    if (life_ >= Life::kStopping) return;
    transition(Life::kStopping);
    queue_.clear();
  }
  pool_.shut_down();
  dispatch_cv_.notify_all();
  readers_cv_.notify_all();
  complete_cv_.notify_all();
  for (std::thread& t : dispatcher_threads_)
    if (t.joinable()) t.join();
  if (completer_.joinable()) completer_.join();  // it waits for whatever was launched
  registry_.shut_down();  // its thread asks idle(), which needs members that go before it
  if (cudaSetDevice(options_.device) != cudaSuccess) (void)cudaGetLastError();
  pool_.destroy();
  std::lock_guard<std::mutex> lock(mutex_);
  transition(Life::kStopped);
}

// Chunks per launch for this job: 1 for big chunks; for small ones a batch of about
// kBatchTargetElements, within the memory one slot may use.
uint64_t CudaBackend::batch_chunks(const JobSpec& spec) const {
  uint64_t chunks = chunks_per_batch(spec);
  if (!spec.fused) {
    const uint64_t per_slot = pool_.budget_bytes() / uint64_t(options_.streams);
    chunks = std::min(chunks, std::max<uint64_t>(1, per_slot / std::max<uint64_t>(1, spec.chunk_bytes())));
  }
  return chunks;
}

}  // namespace gpu


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

StatusOr<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options) {
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
    std::unique_ptr<Backend> backend = std::make_unique<gpu::CudaBackend>(options, prop, budget);
    return backend;
  } catch (const std::exception& e) {
    return Status::error(
        fmt::format("CUDA device {} cannot be used: {}", options.device, e.what()));
  }
}

}  // namespace psched