// ReadPool: the threads a ChunkReader keeps for the pieces of its big reads (ChunkReader::
// set_read_threads: a GPU worker's dispatcher reads a chunk with several, as one thread's pread
// from the page cache moves 6-7 GB/s and a GPU takes 55). Spawning 31 threads per 80 MB chunk
// cost more than a millisecond of a 2 ms read, so they are kept.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace psched {

class ReadPool {
 public:
  explicit ReadPool(unsigned threads);
  ~ReadPool();
  ReadPool(const ReadPool&) = delete;
  ReadPool& operator=(const ReadPool&) = delete;

  // Calls piece(k) for k < pieces (at most threads + 1): piece 0 on the caller's thread, piece k
  // on thread k - 1; returns when all have returned.
  void run(unsigned pieces, const std::function<void(unsigned)>& piece);

 private:
  void loop(unsigned k);

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(unsigned)>* piece_ = nullptr;
  unsigned pieces_ = 0, pieces_left_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace psched
