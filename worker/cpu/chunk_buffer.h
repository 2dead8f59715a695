// ChunkBuffer: the CPU backend's per-thread chunk buffer, where a chunk is created before it is
// reduced. It grows to the largest chunk seen and is kept; nothing writes it but the generator (no
// zero-filling pass of our own), and it asks for transparent huge pages, so a fresh worker's first
// 128 MB chunk costs 64 page faults rather than 32768 and the passes over it few TLB misses.
#pragma once

#include <cstddef>

namespace psched {

class ChunkBuffer {
 public:
  ChunkBuffer() = default;
  ChunkBuffer(const ChunkBuffer&) = delete;
  ChunkBuffer& operator=(const ChunkBuffer&) = delete;
  ~ChunkBuffer();

  // Room for n doubles (contents unspecified). Throws std::bad_alloc when memory is short.
  double* reserve(size_t n);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace psched
