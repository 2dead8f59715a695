// Shared by the CUDA backend's tests (tests/gpu/*_test.cpp, one binary, psched_cuda_tests): a
// backend made for the test, outcomes collected from its completion thread, jobs run chunk by chunk
// against the CPU reference (worker/cpu/reduce.h), and the comparisons they use.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/chunk_grid.h"
#include "worker/cpu/reduce.h"
#include "worker/cuda/cuda_backend.h"

namespace psched::gpu_test {

inline constexpr auto kTimeout = std::chrono::seconds(120);

// Outcomes as the backend's completion thread delivers them.
class Outcomes {
 public:
  Backend::OnDone callback() {
    return [this](std::vector<ChunkOutcome>& outcomes) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (ChunkOutcome& o : outcomes) all_.push_back(std::move(o));
      cv_.notify_all();
    };
  }
  // True once n outcomes of job_id (any job when 0) have arrived.
  bool wait_for(size_t n, uint64_t job_id = 0) {
    std::unique_lock<std::mutex> lock(mutex_);
    return cv_.wait_for(lock, kTimeout, [&] { return count_locked(job_id) >= n; });
  }
  std::vector<ChunkOutcome> of_job(uint64_t job_id) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<ChunkOutcome> out;
    for (const ChunkOutcome& o : all_)
      if (o.job_id == job_id) out.push_back(o);
    return out;
  }
  size_t size() {
    std::lock_guard<std::mutex> lock(mutex_);
    return all_.size();
  }

 private:
  size_t count_locked(uint64_t job_id) const {
    size_t n = 0;
    for (const ChunkOutcome& o : all_) n += (job_id == 0 || o.job_id == job_id);
    return n;
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<ChunkOutcome> all_;
};

inline std::unique_ptr<Backend> backend_with(CudaBackendOptions options = {}) {
  auto made = make_cuda_backend(options);
  INFO(made.message());
  REQUIRE(made.is_ok());
  return std::move(made.value());
}

inline std::shared_ptr<const JobSpec> prepared(const JobSpec& spec) {
  const Status valid = validate(spec);
  INFO(valid.message());
  REQUIRE(valid.is_ok());
  return std::make_shared<const JobSpec>(normalized(spec));
}

inline uint64_t chunk_count(const JobSpec& s) {
  return s.chunks();
}

// Runs the given chunks of the job through the backend; their outcomes, each exactly once and ok.
inline std::map<uint64_t, ChunkOutcome> run_chunks(Backend& backend, Outcomes& outcomes,
                                            std::shared_ptr<const JobSpec> spec, uint64_t job_id,
                                            const std::vector<uint64_t>& chunks) {
  for (uint64_t c : chunks) backend.enqueue(ChunkTask{job_id, c, spec});
  REQUIRE(outcomes.wait_for(chunks.size(), job_id));
  std::map<uint64_t, ChunkOutcome> by_chunk;
  for (ChunkOutcome& o : outcomes.of_job(job_id)) {
    INFO("chunk " << o.chunk << ": " << o.error);
    REQUIRE(o.ok);
    REQUIRE(by_chunk.emplace(o.chunk, std::move(o)).second);
  }
  for (uint64_t c : chunks) REQUIRE(by_chunk.count(c) == 1);
  REQUIRE(by_chunk.size() == chunks.size());
  return by_chunk;
}

// Runs every chunk of the job; outcomes indexed by chunk.
inline std::vector<ChunkOutcome> run_job(Backend& backend, Outcomes& outcomes,
                                  std::shared_ptr<const JobSpec> spec, uint64_t job_id) {
  std::vector<uint64_t> chunks(chunk_count(*spec));
  for (uint64_t c = 0; c < chunks.size(); ++c) chunks[c] = c;
  auto by_chunk = run_chunks(backend, outcomes, spec, job_id, chunks);
  std::vector<ChunkOutcome> out;
  for (auto& [chunk, outcome] : by_chunk) out.push_back(std::move(outcome));
  return out;
}

inline bool near_rel(double a, double b, double rel) {
  if (a == b) return true;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// Relative, but never tighter than tol in absolute terms (a value near 0 carries the rounding
// error of the terms that made it).
inline bool near_abs_rel(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max({1.0, std::fabs(a), std::fabs(b)});
}

inline JobSpec arange_job(uint64_t rows, uint64_t cols, uint64_t chunk_rows, uint64_t chunk_cols) {
  JobSpec s;
  s.rows = rows;
  s.cols = cols;
  s.chunk_rows = chunk_rows;
  s.chunk_cols = chunk_cols;
  s.generator = Generator::kArange;
  s.param0 = 0;
  s.param1 = 1;
  s.scale = 1;
  s.offset = 1;
  s.row_sel = Slice{0, kToEnd, 2};
  s.col_sel = Slice{0, kToEnd, 2};
  return s;
}

inline void require_equal(const PartialSum& gpu, const PartialSum& cpu) {
  CHECK(gpu.count == cpu.count);
  CHECK(gpu.sum == cpu.sum);
  CHECK(gpu.min == cpu.min);
  CHECK(gpu.max == cpu.max);
}
inline void require_equal(const CompactPartial& gpu, const PartialSum& cpu) {
  require_equal(expand(gpu), cpu);
}

}  // namespace psched::gpu_test
