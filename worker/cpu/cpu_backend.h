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
  int test_delay_ms = 0;  // test-only (PSCHED_TEST_CHUNK_DELAY_MS): makes "mid-job" last
};

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options);

}  // namespace psched
