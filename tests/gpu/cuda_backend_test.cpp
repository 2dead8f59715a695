// The CUDA backend against the CPU reference (worker/cpu/reduce.h), chunk by chunk: exact for
// arange and constant, to rounding for normal and uniform; fused against materialized; the memory
// limit; and the pipeline's promise that every enqueued chunk comes back exactly once. Without a
// usable CUDA device the whole binary prints SKIP and succeeds, so CI (no GPU) stays green.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "common/chunk_grid.h"
#include "worker/cpu/reduce.h"
#include "worker/cuda/cuda_backend.h"

using namespace psched;

namespace {

constexpr auto kTimeout = std::chrono::seconds(120);

// Outcomes as the backend's completion thread delivers them.
class Outcomes {
 public:
  Backend::OnDone callback() {
    return [this](ChunkOutcome o) {
      std::lock_guard<std::mutex> lock(mutex_);
      all_.push_back(std::move(o));
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

std::unique_ptr<Backend> backend_with(CudaBackendOptions options = {}) {
  auto made = make_cuda_backend(options);
  INFO(made.message());
  REQUIRE(made.is_ok());
  return std::move(made.value());
}

std::shared_ptr<const JobSpec> prepared(const JobSpec& spec) {
  const Status valid = validate(spec);
  INFO(valid.message());
  REQUIRE(valid.is_ok());
  return std::make_shared<const JobSpec>(normalized(spec));
}

uint64_t chunk_count(const JobSpec& s) {
  return ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.chunks();
}

// Runs the given chunks of the job through the backend; their outcomes, each exactly once and ok.
std::map<uint64_t, ChunkOutcome> run_chunks(Backend& backend, Outcomes& outcomes,
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
std::vector<ChunkOutcome> run_job(Backend& backend, Outcomes& outcomes,
                                  std::shared_ptr<const JobSpec> spec, uint64_t job_id) {
  std::vector<uint64_t> chunks(chunk_count(*spec));
  for (uint64_t c = 0; c < chunks.size(); ++c) chunks[c] = c;
  auto by_chunk = run_chunks(backend, outcomes, spec, job_id, chunks);
  std::vector<ChunkOutcome> out;
  for (auto& [chunk, outcome] : by_chunk) out.push_back(std::move(outcome));
  return out;
}

bool near_rel(double a, double b, double rel) {
  if (a == b) return true;
  return std::fabs(a - b) <= rel * std::max(std::fabs(a), std::fabs(b));
}

// Relative, but never tighter than tol in absolute terms (a value near 0 carries the rounding
// error of the terms that made it).
bool near_abs_rel(double a, double b, double tol) {
  return std::fabs(a - b) <= tol * std::max({1.0, std::fabs(a), std::fabs(b)});
}

JobSpec arange_job(uint64_t rows, uint64_t cols, uint64_t chunk_rows, uint64_t chunk_cols) {
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

// Jobs whose every partial sum is an integer (or a dyadic rational) far below 2^53, so any
// summation order gives the same bits: GPU and CPU must agree exactly.
std::vector<std::pair<std::string, JobSpec>> exact_jobs() {
  std::vector<std::pair<std::string, JobSpec>> jobs;
  jobs.emplace_back("seed-like (x+1)[::2, ::2], ragged edge chunks",
                    arange_job(1000, 1000, 300, 170));
  {
    JobSpec s = arange_job(1000, 1000, 128, 96);
    s.param0 = -5;
    s.param1 = 3;
    s.scale = 2;
    s.offset = -7;
    s.row_sel = Slice{3, 997, 7};
    s.col_sel = Slice{11, 900, 5};
    jobs.emplace_back("arange(-5, 3), 2x-7, [3:997:7, 11:900:5]", s);
  }
  {
    JobSpec s = arange_job(1000, 1000, 256, 200);
    s.dtype = DType::kFloat32;
    s.scale = 0.5;
    s.offset = 0.25;
    s.row_sel = Slice{1, kToEnd, 3};
    s.col_sel = Slice{2, kToEnd, 4};
    jobs.emplace_back("float32 arange, 0.5x+0.25, [1::3, 2::4]", s);
  }
  {
    JobSpec s = arange_job(777, 333, 100, 100);
    s.dtype = DType::kFloat32;
    s.generator = Generator::kConstant;
    s.param0 = 2.5;
    s.offset = 0;
    s.row_sel = Slice{0, kToEnd, 1};
    s.col_sel = Slice{0, kToEnd, 1};
    jobs.emplace_back("float32 constant(2.5), everything", s);
  }
  {
    JobSpec s = arange_job(1, 100000, 10000, 30000);
    s.col_sel = Slice{5, 99999, 3};
    jobs.emplace_back("1-D array, [5:99999:3]", s);
  }
  {
    JobSpec s = arange_job(5000, 1, 700, 10);
    s.row_sel = Slice{1, kToEnd, 3};
    s.col_sel = Slice{0, kToEnd, 1};
    jobs.emplace_back("column vector, narrow chunks", s);
  }
  {
    JobSpec s = arange_job(1000, 800, 100, 100);
    s.row_sel = Slice{0, 10, 1};
    jobs.emplace_back("selection in the first chunk row only (empty chunks)", s);
  }
  {
    JobSpec s = arange_job(1000, 800, 100, 100);
    s.row_sel = Slice{7, kToEnd, 450};
    s.col_sel = Slice{13, kToEnd, 333};
    jobs.emplace_back("steps longer than chunks (one element or none per chunk)", s);
  }
  return jobs;
}

void require_equal(const PartialSum& gpu, const PartialSum& cpu) {
  CHECK(gpu.count == cpu.count);
  CHECK(gpu.sum == cpu.sum);
  CHECK(gpu.min == cpu.min);
  CHECK(gpu.max == cpu.max);
}

}  // namespace

TEST_CASE("GPU partials equal the CPU reference exactly for arange and constant", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;
  uint64_t job_id = 0;
  for (const bool fused : {false, true}) {
    for (auto [name, spec] : exact_jobs()) {
      spec.fused = fused;
      INFO(name << (fused ? " (fused)" : ""));
      auto prepared_spec = prepared(spec);
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      for (uint64_t c = 0; c < gpu.size(); ++c) {
        INFO("chunk " << c);
        require_equal(gpu[c].partial, reduce_chunk_cpu(*prepared_spec, c, scratch));
      }
    }
  }
}

TEST_CASE("single GPU elements equal the CPU's: uniform bit for bit, normal to rounding", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;

  // 100000 x 100000 (indices past 2^32), one selected element per 1000 x 1000 chunk: each
  // partial's sum is one element, unreduced. 300 of the 10000 chunks, spread over the array.
  JobSpec base = arange_job(100000, 100000, 1000, 1000);
  base.row_sel = Slice{517, kToEnd, 1000};
  base.col_sel = Slice{999, kToEnd, 1000};
  base.scale = 1;
  base.offset = 0;
  std::vector<uint64_t> chunks;
  for (uint64_t k = 0; k < 300; ++k) chunks.push_back((k * 33 + k % 100) % 10000);
  chunks.push_back(9999);  // the last element of the array
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());

  JobSpec uniform = base;
  uniform.generator = Generator::kUniform;
  uniform.param0 = -3;
  uniform.param1 = 5;
  uniform.seed = 0xfeedface12345678ull;
  JobSpec normal = base;
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 2;
  normal.seed = 99;
  JobSpec normal_f32 = normal;
  normal_f32.dtype = DType::kFloat32;

  uint64_t job_id = 0;
  for (const JobSpec& job : {uniform, normal, normal_f32}) {
    for (const bool fused : {false, true}) {
      JobSpec spec = job;
      spec.fused = fused;
      INFO(describe(spec));
      auto prepared_spec = prepared(spec);
      JobSpec cpu_spec = *prepared_spec;
      cpu_spec.fused = true;  // the same values; the CPU need not create 10^6 elements per chunk
      const auto gpu = run_chunks(*backend, outcomes, prepared_spec, ++job_id, chunks);
      for (const auto& [chunk, outcome] : gpu) {
        INFO("chunk " << chunk);
        const PartialSum cpu = reduce_chunk_cpu(cpu_spec, chunk, scratch);
        REQUIRE(cpu.count == 1);
        CHECK(outcome.partial.count == 1);
        if (spec.generator == Generator::kUniform) {
          CHECK(outcome.partial.sum == cpu.sum);
        } else if (spec.dtype == DType::kFloat32) {
          // A last-bit difference in the double may cross a rounding boundary of the float.
          CHECK(near_rel(outcome.partial.sum, cpu.sum, 1.2e-7));
        } else {
          CHECK(near_abs_rel(outcome.partial.sum, cpu.sum, 1e-13));
        }
        CHECK(outcome.partial.min == outcome.partial.sum);
        CHECK(outcome.partial.max == outcome.partial.sum);
      }
    }
  }
}

TEST_CASE("GPU partials agree with the CPU reference to rounding for normal and uniform", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  std::vector<double> scratch;

  JobSpec normal = arange_job(2000, 1500, 512, 384);
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 1;
  normal.seed = 42;
  JobSpec uniform = arange_job(1800, 1300, 500, 400);
  uniform.generator = Generator::kUniform;
  uniform.param0 = 2;
  uniform.param1 = 5;
  uniform.seed = 7;
  uniform.dtype = DType::kFloat32;
  uniform.row_sel = Slice{1, kToEnd, 3};
  uniform.col_sel = Slice{0, kToEnd, 5};

  uint64_t job_id = 0;
  for (const JobSpec& base : {normal, uniform}) {
    for (const bool fused : {false, true}) {
      JobSpec spec = base;
      spec.fused = fused;
      INFO(describe(spec));
      auto prepared_spec = prepared(spec);
      // Uniform elements are bit-identical, so min and max are too. Normal ones agree to
      // rounding; stored as float32 a last-bit difference can become one float ulp.
      const double extreme_rel = spec.generator == Generator::kUniform ? 0.0
                                 : spec.dtype == DType::kFloat32       ? 1.2e-7
                                                                       : 1e-12;
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      for (uint64_t c = 0; c < gpu.size(); ++c) {
        INFO("chunk " << c);
        const PartialSum cpu = reduce_chunk_cpu(*prepared_spec, c, scratch);
        CHECK(gpu[c].partial.count == cpu.count);
        CHECK(near_rel(gpu[c].partial.sum, cpu.sum, 1e-12));
        CHECK(near_rel(gpu[c].partial.min, cpu.min, extreme_rel));
        CHECK(near_rel(gpu[c].partial.max, cpu.max, extreme_rel));
      }
    }
  }
}

TEST_CASE("fused chunks agree with materialized chunks on the GPU", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());

  JobSpec normal = arange_job(3000, 2000, 1000, 1000);
  normal.generator = Generator::kNormal;
  normal.param0 = 10;
  normal.param1 = 1;
  normal.seed = 1234;
  JobSpec uniform_f32 = normal;
  uniform_f32.generator = Generator::kUniform;
  uniform_f32.param0 = -1;
  uniform_f32.param1 = 3;
  uniform_f32.dtype = DType::kFloat32;
  uniform_f32.row_sel = Slice{5, 2900, 3};

  uint64_t job_id = 0;
  for (const JobSpec& base : {normal, uniform_f32}) {
    INFO(describe(base));
    JobSpec fused = base;
    fused.fused = true;
    const auto materialized_out = run_job(*backend, outcomes, prepared(base), ++job_id);
    const auto fused_out = run_job(*backend, outcomes, prepared(fused), ++job_id);
    for (uint64_t c = 0; c < fused_out.size(); ++c) {
      INFO("chunk " << c);
      const PartialSum& m = materialized_out[c].partial;
      const PartialSum& f = fused_out[c].partial;
      CHECK(f.count == m.count);
      // The same element values on both paths; only the summation order may differ.
      CHECK(near_rel(f.sum, m.sum, 1e-12));
      CHECK(f.min == m.min);
      CHECK(f.max == m.max);
    }
  }
}

TEST_CASE("a chunk larger than the memory limit fails with a clear error, fused chunks still run",
          "[gpu]") {
  CudaBackendOptions options;
  options.memory_limit_bytes = 4 << 20;  // a 1000 x 1000 float64 chunk is 7.6 MiB
  Outcomes outcomes;
  auto backend = backend_with(options);
  backend->start(outcomes.callback());

  JobSpec spec = arange_job(2000, 1000, 1000, 1000);
  backend->enqueue(ChunkTask{1, 0, prepared(spec)});
  REQUIRE(outcomes.wait_for(1, 1));
  const ChunkOutcome failed = outcomes.of_job(1).at(0);
  CHECK_FALSE(failed.ok);
  INFO(failed.error);
  CHECK(failed.error.find("does not fit in memory limit 4.0 MiB") != std::string::npos);
  CHECK(failed.error.find("chunk of 7.") != std::string::npos);

  spec.fused = true;  // nothing materialized: only CUB's temporary storage is needed
  auto fused_spec = prepared(spec);
  std::vector<double> scratch;
  const auto fused = run_job(*backend, outcomes, fused_spec, 2);
  for (uint64_t c = 0; c < fused.size(); ++c)
    require_equal(fused[c].partial, reduce_chunk_cpu(*fused_spec, c, scratch));
}

TEST_CASE("a memory limit that holds one chunk buffer runs every chunk through it", "[gpu]") {
  CudaBackendOptions options;
  options.memory_limit_bytes = 12 << 20;  // one 7.6 MiB buffer, not three
  options.streams = 3;
  Outcomes outcomes;
  auto backend = backend_with(options);
  backend->start(outcomes.callback());
  std::vector<double> scratch;

  uint64_t job_id = 0;
  for (JobSpec spec : {arange_job(4000, 3000, 1000, 1000), arange_job(1000, 1000, 200, 300)}) {
    for (const bool fused : {false, true}) {
      spec.fused = fused;
      INFO(describe(spec));
      auto prepared_spec = prepared(spec);
      const auto gpu = run_job(*backend, outcomes, prepared_spec, ++job_id);
      for (uint64_t c = 0; c < gpu.size(); ++c)
        require_equal(gpu[c].partial, reduce_chunk_cpu(*prepared_spec, c, scratch));
    }
  }
}

TEST_CASE("many chunks of several jobs enqueued at once all come back exactly once", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());

  auto small = prepared(arange_job(2000, 2000, 100, 100));  // 400 chunks
  JobSpec big_spec = arange_job(3000, 3000, 1500, 1000);    // 6 chunks, larger buffers
  auto big = prepared(big_spec);
  JobSpec constant = arange_job(1000, 3000, 100, 250);      // 120 chunks, fused
  constant.generator = Generator::kConstant;
  constant.param0 = 3;
  constant.fused = true;
  auto fused = prepared(constant);

  const std::map<uint64_t, std::shared_ptr<const JobSpec>> jobs{{1, small}, {2, big}, {3, fused}};
  const uint64_t total = 400 + 6 + 120;
  for (uint64_t c = 0; c < 400; ++c) {
    backend->enqueue(ChunkTask{1, c, small});
    if (c < 6) backend->enqueue(ChunkTask{2, c, big});
    if (c < 120) backend->enqueue(ChunkTask{3, c, fused});
  }
  REQUIRE(outcomes.wait_for(total));

  std::vector<double> scratch;
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const auto& [job_id, spec] : jobs) {
    for (const ChunkOutcome& o : outcomes.of_job(job_id)) {
      INFO("job " << job_id << " chunk " << o.chunk << ": " << o.error);
      REQUIRE(seen.insert({job_id, o.chunk}).second);
      REQUIRE(o.ok);
      require_equal(o.partial, reduce_chunk_cpu(*spec, o.chunk, scratch));
      CHECK(o.busy_seconds >= 0);
    }
  }
  CHECK(seen.size() == total);
  CHECK(outcomes.size() == total);
}

TEST_CASE("busy seconds of overlapping streams add up to no more than the wall time", "[gpu]") {
  for (const int streams : {1, 3, 8}) {
    INFO("streams " << streams);
    Outcomes outcomes;
    auto backend = backend_with({.streams = streams});
    backend->start(outcomes.callback());
    JobSpec seed = arange_job(8000, 8000, 2000, 2000);  // 16 chunks of 32 MB, normal(10, 1)
    seed.generator = Generator::kNormal;
    seed.param0 = 10;
    seed.param1 = 1;
    seed.row_sel.step = seed.col_sel.step = 2;
    auto spec = prepared(seed);
    backend->enqueue(ChunkTask{1, 0, spec});  // warm-up: buffers allocated before the clock starts
    REQUIRE(outcomes.wait_for(1));
    const auto t0 = std::chrono::steady_clock::now();
    for (int pass = 0; pass < 10; ++pass)
      for (uint64_t c = 0; c < 16; ++c) backend->enqueue(ChunkTask{1, c, spec});
    REQUIRE(outcomes.wait_for(161));
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double busy = 0;
    for (const ChunkOutcome& o : outcomes.of_job(1)) {
      REQUIRE(o.ok);
      CHECK(o.busy_seconds >= 0);
      busy += o.busy_seconds;
    }
    busy -= outcomes.of_job(1).front().busy_seconds;  // the warm-up chunk came first
    CHECK(busy > 0);
    CHECK(busy <= wall * 1.001 + 1e-4);
  }
}

TEST_CASE("chunks enqueued from on_done keep a window in flight until the job is done", "[gpu]") {
  // Everything on_done touches is declared before the backend, so it outlives its threads.
  Outcomes outcomes;
  auto spec = prepared(arange_job(3000, 2000, 100, 200));  // 300 chunks
  const uint64_t n = chunk_count(*spec);
  std::mutex mutex;
  uint64_t next = 0;
  auto record = outcomes.callback();
  auto backend = backend_with();
  Backend* raw = backend.get();
  backend->start([&](ChunkOutcome o) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (next < n) raw->enqueue(ChunkTask{1, next++, spec});
    }
    record(std::move(o));
  });
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (int i = 0; i < backend->slots() && next < n; ++i) raw->enqueue(ChunkTask{1, next++, spec});
  }
  REQUIRE(outcomes.wait_for(n, 1));
  std::set<uint64_t> seen;
  for (const ChunkOutcome& o : outcomes.of_job(1)) {
    REQUIRE(o.ok);
    REQUIRE(seen.insert(o.chunk).second);
  }
  CHECK(seen.size() == n);
  backend->stop();
}

TEST_CASE("drop_job forgets queued chunks of that job only", "[gpu]") {
  Outcomes outcomes;  // declared first: it must outlive the backend's threads
  auto backend = backend_with();
  backend->start(outcomes.callback());
  auto spec = prepared(arange_job(2000, 2000, 100, 100));  // 400 chunks
  for (uint64_t c = 0; c < 400; ++c) backend->enqueue(ChunkTask{1, c, spec});
  for (uint64_t c = 0; c < 400; ++c) backend->enqueue(ChunkTask{2, c, spec});
  backend->drop_job(1);
  REQUIRE(outcomes.wait_for(400, 2));
  backend->stop();  // after stop no outcome arrives, so the counts below are final

  std::set<uint64_t> job1, job2;
  for (const ChunkOutcome& o : outcomes.of_job(1)) REQUIRE(job1.insert(o.chunk).second);
  for (const ChunkOutcome& o : outcomes.of_job(2)) REQUIRE(job2.insert(o.chunk).second);
  CHECK(job2.size() == 400);
  CHECK(job1.size() < 400);  // only those already taken off the queue
}

TEST_CASE("the backend describes its device and stops idempotently", "[gpu]") {
  CudaBackendOptions options;
  options.memory_limit_bytes = uint64_t{1} << 30;
  options.streams = 2;
  Outcomes outcomes;
  auto backend = backend_with(options);
  const DeviceInfo info = backend->info();
  CHECK(info.backend == "cuda");
  CHECK_FALSE(info.device_name.empty());
  CHECK(info.memory_total_bytes > 0);
  CHECK(info.memory_limit_bytes == uint64_t{1} << 30);
  CHECK(info.compute_major >= 3);
  CHECK(backend->slots() >= 3);

  backend->start(outcomes.callback());
  auto spec = prepared(arange_job(2000, 2000, 100, 100));
  for (uint64_t c = 0; c < 400; ++c) backend->enqueue(ChunkTask{1, c, spec});
  backend->stop();
  const size_t after_stop = outcomes.size();
  backend->stop();
  backend->enqueue(ChunkTask{1, 0, spec});  // ignored once stopped
  CHECK(outcomes.size() == after_stop);
}

TEST_CASE("a chunk index outside its job fails with a clear error", "[gpu]") {
  Outcomes outcomes;
  auto backend = backend_with();
  backend->start(outcomes.callback());
  backend->enqueue(ChunkTask{1, 100, prepared(arange_job(1000, 1000, 100, 100))});
  REQUIRE(outcomes.wait_for(1, 1));
  const ChunkOutcome o = outcomes.of_job(1).at(0);
  CHECK_FALSE(o.ok);
  CHECK(o.error == "chunk 100 is out of range (the job has 100 chunks)");
}

TEST_CASE("make_cuda_backend refuses a device or stream count it cannot use", "[gpu]") {
  CudaBackendOptions bad_device;
  bad_device.device = 1000;
  auto a = make_cuda_backend(bad_device);
  REQUIRE_FALSE(a.is_ok());
  CHECK(a.message().find("got 1000") != std::string::npos);

  CudaBackendOptions no_streams;
  no_streams.streams = 0;
  auto b = make_cuda_backend(no_streams);
  REQUIRE_FALSE(b.is_ok());
  CHECK(b.message().find("streams") != std::string::npos);
}

int main(int argc, char* argv[]) {
  std::string why;
  const int devices = cuda_device_count(&why);
  if (devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n", why.c_str());
    return 0;
  }
  std::printf("psched_cuda_tests: %d CUDA device(s)\n", devices);
  return Catch::Session().run(argc, argv);
}
