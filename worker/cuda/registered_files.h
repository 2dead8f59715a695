// Flat files' pages registered with CUDA where they lie, so that a stored chunk is copied to the
// device straight from the page cache: no pread into pinned staging first. A GPU takes 54 GB/s
// from registered pages (an H200: its pinned floor), where the readers' pread and copy gave 46.
//
// A file is registered in blocks (kRegisterBlockBytes) of its mapping (storage/mapped_file.h) as
// its chunks ask for them; until a chunk's blocks are all registered it goes through the staging.
// Registering pins the pages at 40-46 GB/s on one thread and holds up the device's other work
// while it does (the staging's copies waited: a first job of a 16 GB .npy on an H200 ran at 22
// GB/s against 38 when blocks were registered as it went), so a thread of its own registers only
// while the backend is idle: between jobs, a block at a time (a job arriving waits for one block,
// about 1.5 ms). The first job over a file goes through the staging; the next, after a pause, is
// copied from its pages. Tests register on the asking thread (Mode::kAtOnce). The pages pinned are
// the page cache's own: no memory is added, but they cannot be evicted while registered, so a
// limit bounds them (half the host's memory by default), and a file no chunk has asked for in
// kIdleMappingSeconds is unregistered (a deleted file's space comes back, as with the CPU's
// mappings). A registration the system refuses (a locked-memory limit) leaves the file to the staging.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/mapped_file.h"

namespace psched::gpu {

inline constexpr uint64_t kRegisterBlockBytes = uint64_t{64} << 20;

// One mapping's registered blocks. Each launch copying from it holds it (Launch::source), so its
// blocks are unregistered (by whichever thread lets go last) only once no copy from them is in flight.
class RegisteredFile {
 public:
  // promised: the registry's count of bytes registered or queued, which this file's blocks leave
  // when it goes (the registry outlives every file: launches hold theirs only while in flight).
  RegisteredFile(std::shared_ptr<const MappedFile> map, uint64_t block_bytes, std::atomic<uint64_t>* promised);
  ~RegisteredFile();
  RegisteredFile(const RegisteredFile&) = delete;
  RegisteredFile& operator=(const RegisteredFile&) = delete;

  const unsigned char* data() const { return map_->data; }
  uint64_t block_bytes() const { return block_bytes_; }
  size_t blocks() const { return state_.size(); }
  // The bytes of block k (the last one's rounded up to a page: the mapping's own end).
  uint64_t block_size(size_t k) const;

 private:
  friend class FileRegistry;
  enum State : uint8_t { kNone, kQueued, kRegistered, kRefused };
  const std::shared_ptr<const MappedFile> map_;
  const uint64_t block_bytes_;
  std::atomic<uint64_t>* const promised_;
  std::vector<std::atomic<uint8_t>> state_;  // State of each block
  std::atomic<bool> refused_{false};  // a registration failed: no more blocks are asked for
};

class FileRegistry {
 public:
  enum class Mode { kBackground, kAtOnce };
  // device: the CUDA device whose context registers (the registry's thread sets it). limit_bytes:
  // what may be registered at once in all; 0 registers nothing. idle: whether the backend has
  // nothing in hand (Mode::kBackground registers only then; called with no lock of the registry's).
  FileRegistry(int device, uint64_t limit_bytes, std::function<bool()> idle, Mode mode = Mode::kBackground,
               uint64_t block_bytes = kRegisterBlockBytes);
  ~FileRegistry();  // shut_down(), then unregisters what no launch holds (a held file goes with its last launch)
  // Stops the registry's thread (it asks the backend whether it is idle: the backend calls this
  // before its own members go). Later leases return null.
  void shut_down();
  FileRegistry(const FileRegistry&) = delete;
  FileRegistry& operator=(const FileRegistry&) = delete;

  bool enabled() const { return limit_bytes_ > 0; }
  // The file mapped as `map` (its path: `path`) where bytes [begin, end) of it are registered, to
  // be held while copies from them are in flight; null otherwise, with those bytes' blocks asked for
  // (Mode::kAtOnce: registered before this returns, and the file returned where that worked). The
  // file returned may be another mapping of the same file (FileIdentity): copy from its data().
  std::shared_ptr<RegisteredFile> lease(const std::string& path, const std::shared_ptr<const MappedFile>& map,
                                        uint64_t begin, uint64_t end);
  // Bytes registered or queued to be.
  uint64_t promised_bytes() const { return promised_bytes_.load(); }

 private:
  struct Entry {
    std::shared_ptr<RegisteredFile> file;
    std::chrono::steady_clock::time_point used;
  };
  struct Request {
    std::weak_ptr<RegisteredFile> file;
    size_t block = 0;
  };
  void run();
  static void register_block(RegisteredFile& file, size_t block);
  std::vector<std::shared_ptr<RegisteredFile>> drop_idle(std::chrono::steady_clock::time_point now);

  const int device_;
  const uint64_t limit_bytes_;
  const std::function<bool()> idle_;
  const Mode mode_;
  const uint64_t block_bytes_;
  std::atomic<uint64_t> promised_bytes_{0};  // blocks registered or queued, within limit_bytes_

  std::mutex mutex_;  // guards what follows
  std::condition_variable wake_;
  std::map<std::string, Entry> files_;  // by path: a file changed gets a new mapping, which replaces it
  std::deque<Request> requests_;
  bool stopping_ = false;
  std::thread thread_;  // started by the first lease (the backend is whole by then)
};

// Chunks copied from registered pages by this process so far (tests).
uint64_t registered_chunk_copies();

}  // namespace psched::gpu
