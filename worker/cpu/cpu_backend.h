// CpuBackend: chunks computed by a pool of threads (one chunk per thread at a time, so a chunk's
// partial is the same whatever the thread count), each with its own reusable chunk buffer.
#pragma once

#include <chrono>
#include <memory>

#include "worker/backend.h"

namespace psched {

struct CpuBackendOptions {
  int threads = 0;  // 0: one per core
  uint64_t memory_limit_bytes = 0;  // 0: no limit; else threads x chunk buffer must fit
  std::chrono::microseconds spin{0};  // an idle thread polls its queue this long before sleeping
  int test_delay_ms = 0;
  // test only (PSCHED_TEST_DEVICE_FAULT_ON_CHUNK): this chunk fails as a lost device would
  // (device_lost), so the worker's reaction to a sticky GPU error is tested without a GPU
  int64_t test_fault_on_chunk = -1;  // test-only (PSCHED_TEST_CHUNK_DELAY_MS): makes "mid-job" last
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace psched
