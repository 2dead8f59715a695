// CpuBackend: chunks computed by a pool of threads (one chunk per thread at a time, or a big stored
// chunk's bands of rows, whose exact partials merge into the chunk's: the same bits whatever the
// thread count), each with its own reusable chunk buffer.
#pragma once

#include <chrono>
#include <memory>

#include "worker/backend.h"

namespace psched {

struct CpuBackendOptions {
  int threads = 0;  // 0: one per core
  uint64_t memory_limit_bytes = 0;  // 0: no limit; else threads x chunk buffer must fit
  std::chrono::microseconds spin{0};  // an idle thread polls its queue this long before sleeping
  // A flat file's chunk bigger than this (as doubles) is taken a band of rows of about this size
  // at a time, so that a job's last chunks are shared by every thread (0: whole chunks). A 32-core
  // host summing a 100-chunk .npy (80 MB chunks) waited on its last round: 76-83 GB/s whole, 84-87
  // in bands (bench/README.md).
  uint64_t band_bytes = uint64_t{8} << 20;
  int test_delay_ms = 0;  // test only (PSCHED_TEST_CHUNK_DELAY_MS), after each chunk or band: makes "mid-job" last
  // test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK): this chunk fails as a lost device would
  // (device_lost), so the worker's reaction to a sticky GPU error is tested without a GPU
  int64_t test_fault_on_chunk = -1;
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace psched
