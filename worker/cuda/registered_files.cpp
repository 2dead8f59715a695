#include "worker/cuda/registered_files.h"

#include <unistd.h>

#include <algorithm>

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

namespace psched::gpu {
namespace {

std::atomic<uint64_t> chunk_copies{0};

// How often a registry with blocks to register looks whether the backend has become idle.
constexpr auto kIdlePoll = std::chrono::milliseconds(10);

uint64_t page_bytes() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? uint64_t(page) : 4096;
}

// Whether the device can take registered read-only pages (a mapping opened read-only is
// registered only so); where it cannot, every stored chunk goes through the staging.
bool registers_read_only(int device) {
  int host_register = 0, read_only = 0;
  if (cudaDeviceGetAttribute(&host_register, cudaDevAttrHostRegisterSupported, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return host_register != 0 && read_only != 0;
}

}  // namespace

RegisteredFile::RegisteredFile(std::shared_ptr<const MappedFile> map, uint64_t block_bytes,
                               std::atomic<uint64_t>* promised)
    : map_(std::move(map)),
      block_bytes_(block_bytes),
      promised_(promised),
      state_(size_t((map_->size + block_bytes - 1) / block_bytes)) {
  for (std::atomic<uint8_t>& s : state_) s.store(kNone);
}

uint64_t RegisteredFile::block_size(size_t k) const {
  const uint64_t page = page_bytes();
  const uint64_t end = std::min((k + 1) * block_bytes_, (map_->size + page - 1) / page * page);
  return end - k * block_bytes_;
}

RegisteredFile::~RegisteredFile() {
  for (size_t k = 0; k < state_.size(); ++k) {
    const uint8_t s = state_[k].load();
    if (s == kRegistered) {
      const cudaError_t e = cudaHostUnregister(const_cast<unsigned char*>(map_->data) + k * block_bytes_);
      if (e != cudaSuccess) {
        (void)cudaGetLastError();
        spdlog::warn("cuda backend: cudaHostUnregister of a stored file's block failed: {}", cudaGetErrorString(e));
      }
    }
    if (s == kRegistered || s == kQueued) promised_->fetch_sub(block_size(k));
  }
}

FileRegistry::FileRegistry(int device, uint64_t limit_bytes, std::function<bool()> idle, Mode mode,
                           uint64_t block_bytes)
    : device_(device),
      limit_bytes_(limit_bytes > 0 && registers_read_only(device) ? limit_bytes : 0),
      idle_(std::move(idle)),
      mode_(mode),
      block_bytes_(block_bytes) {}

FileRegistry::~FileRegistry() {
  shut_down();
  if (cudaSetDevice(device_) != cudaSuccess) (void)cudaGetLastError();
  files_.clear();
}

void FileRegistry::shut_down() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RegisteredFile> FileRegistry::lease(const std::string& path,
                                                    const std::shared_ptr<const MappedFile>& map, uint64_t begin,
                                                    uint64_t end) {
  if (limit_bytes_ == 0 || map == nullptr || begin >= end || end > map->size) return nullptr;
  std::shared_ptr<RegisteredFile> file, replaced;  // replaced: let go of outside the lock
  std::vector<size_t> now;  // Mode::kAtOnce: blocks to register on this thread
  bool asked = false;       // Mode::kBackground: blocks queued for the registry's thread
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return nullptr;
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    Entry& entry = files_[path];
    // New, or the file changed. A new mapping of the same file (the process's mappings keep 16
    // files: an npy stack's readers move through more, and map them again) keeps the registered
    // one, whose bytes are the same.
    if (entry.file == nullptr || !(entry.file->map_->id == map->id)) {
      replaced = std::move(entry.file);
      entry.file = std::make_shared<RegisteredFile>(map, block_bytes_, &promised_bytes_);
    }
    entry.used = std::chrono::steady_clock::now();
    file = entry.file;
    bool ready = true;
    for (size_t k = size_t(begin / block_bytes_); k <= size_t((end - 1) / block_bytes_); ++k) {
      std::atomic<uint8_t>& state = file->state_[k];
      const uint8_t s = state.load();
      if (s == RegisteredFile::kRegistered) continue;
      ready = false;
      if (s != RegisteredFile::kNone || file->refused_.load()) continue;  // queued or refused: staged
      const uint64_t bytes = file->block_size(k);
      if (promised_bytes_.load() + bytes > limit_bytes_) continue;  // past the limit: the staging
      promised_bytes_ += bytes;
      state.store(RegisteredFile::kQueued);
      if (mode_ == Mode::kAtOnce) now.push_back(k);
      else requests_.push_back(Request{file, k}), asked = true;
    }
    if (ready) {
      ++chunk_copies;
      return file;
    }
  }
  if (mode_ == Mode::kBackground) {
    if (asked) wake_.notify_all();
    return nullptr;
  }
  for (size_t k : now) register_block(*file, k);
  for (size_t k = size_t(begin / block_bytes_); k <= size_t((end - 1) / block_bytes_); ++k)
    if (file->state_[k].load() != RegisteredFile::kRegistered) return nullptr;
  ++chunk_copies;
  return file;
}

// Registers block k (queued by the caller, registered by it alone) read-only where it lies. A refusal leaves the
// file's other blocks to the staging too: the next would most likely be refused as well, at a
// call's cost each (blocks already queued are given up as their turn comes).
void FileRegistry::register_block(RegisteredFile& file, size_t k) {
  cudaError_t e = cudaErrorNotPermitted;
  if (!file.refused_.load()) {
    void* at = const_cast<unsigned char*>(file.data()) + k * file.block_bytes();
    e = cudaHostRegister(at, file.block_size(k), cudaHostRegisterReadOnly);
    if (e == cudaSuccess) {
      file.state_[k].store(RegisteredFile::kRegistered);
      return;
    }
    (void)cudaGetLastError();
    if (!file.refused_.exchange(true))
      spdlog::info("cuda backend: a stored file's pages could not be registered with CUDA ({}): its chunks go "
                   "through pinned staging",
                   cudaGetErrorString(e));
  }
  file.promised_->fetch_sub(file.block_size(k));
  file.state_[k].store(RegisteredFile::kRefused);
}

void FileRegistry::run() {
  if (cudaSetDevice(device_) != cudaSuccess) (void)cudaGetLastError();
  auto dropped = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    const auto now = std::chrono::steady_clock::now();
    if (now - dropped >= std::chrono::seconds(1)) {  // idle files let go of, busy or not
      dropped = now;
      std::vector<std::shared_ptr<RegisteredFile>> idle = drop_idle(now);
      lock.unlock();
      idle.clear();  // unregisters those no launch holds: not under the lock
      lock.lock();
      continue;
    }
    if (requests_.empty()) {
      wake_.wait_for(lock, std::chrono::seconds(1));
      continue;
    }
    // Only while the backend is idle (the header says why), checked again before each block.
    lock.unlock();
    const bool idle = mode_ == Mode::kAtOnce || idle_();
    lock.lock();
    if (!idle) {
      wake_.wait_for(lock, kIdlePoll);
      continue;
    }
    if (stopping_ || requests_.empty()) continue;
    Request r = std::move(requests_.front());
    requests_.pop_front();
    std::shared_ptr<RegisteredFile> file = r.file.lock();
    if (file == nullptr) continue;  // dropped while queued (its destructor gave the bytes back)
    if (file->state_[r.block].load() != RegisteredFile::kQueued) continue;
    lock.unlock();
    register_block(*file, r.block);
    file.reset();  // may unregister, if the registry let go meanwhile: not under the lock
    lock.lock();
  }
}

// Lets go of files no chunk asked for in kIdleMappingSeconds (a launch still copying from one keeps
// it to its end); the caller lets go of them. mutex_ held.
std::vector<std::shared_ptr<RegisteredFile>> FileRegistry::drop_idle(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<RegisteredFile>> idle;
  for (auto it = files_.begin(); it != files_.end();) {
    if (now - it->second.used >= std::chrono::seconds(kIdleMappingSeconds)) {
      idle.push_back(std::move(it->second.file));
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  return idle;
}

uint64_t registered_chunk_copies() { return chunk_copies.load(); }

}  // namespace psched::gpu
