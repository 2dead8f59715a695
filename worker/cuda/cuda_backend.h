// The CUDA backend: chunks are created and reduced on one GPU through a few CUDA streams, each with
// its own device buffer, so chunk k+1 is being generated while chunk k is reduced (docs/design.md,
// "Workers and backends"). Plain C++: no CUDA types here, so the worker and the tests include it with g++.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "worker/backend.h"

namespace psched {

struct CudaBackendOptions {
  int device = 0;                   // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  uint64_t memory_limit_bytes = 0;  // device memory the backend may allocate; 0: free memory
  // Stream slots, each with its buffer: launches (a chunk or a batch) in flight on the GPU at once.
  // Several let the compute-bound generator of one launch overlap the memory-bound reduction of
  // another (bench/README.md has the measurements).
  int streams = 6;
  // Stored arrays: chunks read at once, each by a dispatcher thread of its own with its own reader
  // (storage/chunk_reader.h: a file read, or a Zarr chunk decompressed, into the chunk's slot's
  // pinned memory while the other slots compute); a generated job's chunks keep one dispatcher.
  // Each reader needs a slot while it reads, so the pool has max(streams, readers) slots, and
  // generated launches use `streams` of them at most. 0: one per core, 4 to 32 (a Zarr chunk is
  // decompressed by one thread: six readers on 16 cores decoded at 0.42-0.53 x the cores' floor,
  // bench/README.md).
  unsigned readers = 0;
  // Stored arrays: threads reading in all, shared evenly by the readers (a flat file's chunk is
  // split among its reader's share). 0: every core, 4 to 32 (one thread's pread from the page
  // cache moves 6.4 GB/s, 32 threads 50: bench/README.md; half the cores held one H100 on a
  // 16-core host to 0.55 x its floors).
  unsigned read_threads = 0;
  // Stored arrays: pinned host memory the readers' staging may hold in all (each reader's chunk as
  // read, until its copy to the device is done); fewer chunks are read at once when it is short,
  // one at least. 0: an eighth of the host's memory.
  uint64_t pinned_limit_bytes = 0;
  // Stored .npy, raw and npy stack files (ChunkReader::views_as_stored): bytes of their pages the
  // backend may register with CUDA at once, so that their chunks are copied to the device from the
  // page cache itself, with no pread into the staging (worker/cuda/registered_files.h). 0: none,
  // every chunk staged.
  // UINT64_MAX: half of the host's memory (register_limit_per_gpu(1), core/reader_share.h).
  uint64_t register_limit_bytes = UINT64_MAX;
  // Tests: files registered by the dispatcher asking, before its copy (not by a thread of their
  // own, whose progress a test cannot know), in blocks of this many bytes (0: kRegisterBlockBytes).
  bool test_register_at_once = false;
  uint64_t test_register_block_bytes = 0;
  int64_t test_trap_on_chunk = -1;  // test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK): fault the
                                    // GPU on this chunk (a trap), as a hardware error would
};

// Number of usable CUDA devices; 0 with *why set ("no CUDA driver", "no CUDA device", or CUDA's
// error string) when there is none. why may be null.
int cuda_device_count(std::string* why);

// A backend on options.device, or an error Status saying why the device cannot be used. The
// backend's on_done runs on its completion thread, one outcome at a time; outcomes stop once stop()
// has begun. stop() must not be called from on_done.
StatusOr<std::unique_ptr<Backend>> make_cuda_backend(const CudaBackendOptions& options);

}  // namespace psched
