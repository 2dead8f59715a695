#include "worker/cpu/chunk_buffer.h"

#include <sys/mman.h>

#include <new>

namespace psched {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

ChunkBuffer::~ChunkBuffer() {
  if (data_) munmap(data_, bytes_);
}

double* ChunkBuffer::reserve(size_t n) {
  const size_t want = n * sizeof(double);
  if (want <= bytes_ && data_) return static_cast<double*>(data_);
  if (data_) munmap(data_, bytes_);
  data_ = nullptr;
  bytes_ = 0;
  // Whole huge pages: mmap'd memory is page-aligned, and a 2 MiB multiple lets THP back it all.
  const size_t bytes = (want + kHugePage - 1) / kHugePage * kHugePage;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  madvise(p, bytes, MADV_HUGEPAGE);  // advice only: without THP the buffer still works
  data_ = p;
  bytes_ = bytes;
  return static_cast<double*>(data_);
}

}  // namespace psched
