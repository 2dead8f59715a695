// The CUDA backend's pipeline: the memory limit, every enqueued chunk back exactly once, busy time
// within the wall time, a window kept full from on_done, drop_job, stop, and clear errors for
// chunks and options it cannot run. Part of psched_cuda_tests (main in cuda_backend_test.cpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.h"

using namespace psched;
using namespace psched::gpu_test;

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

  spec.fused = true;  // nothing materialized: no chunk buffer is needed
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
    JobSpec deepops = arange_job(8000, 8000, 2000, 2000);  // 16 chunks of 32 MB, normal(10, 1)
    deepops.generator = Generator::kNormal;
    deepops.param0 = 10;
    deepops.param1 = 1;
    deepops.row_sel.step = deepops.col_sel.step = 2;
    auto spec = prepared(deepops);
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
  backend->start([&](std::vector<ChunkOutcome>& done) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t k = 0; k < done.size() && next < n; ++k) raw->enqueue(ChunkTask{1, next++, spec});
    }
    record(done);
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
  // 200,000 small chunks: 25 batches of 8192, more than the stream slots can hold, so part of
  // job 1 is still queued when it is dropped.
  auto spec = prepared(arange_job(4000, 5000, 10, 10));
  const uint64_t n = chunk_count(*spec);
  for (uint64_t c = 0; c < n; ++c) backend->enqueue(ChunkTask{1, c, spec});
  for (uint64_t c = 0; c < n; ++c) backend->enqueue(ChunkTask{2, c, spec});
  backend->drop_job(1);
  REQUIRE(outcomes.wait_for(n, 2));
  backend->stop();  // after stop no outcome arrives, so the counts below are final

  std::set<uint64_t> job1, job2;
  for (const ChunkOutcome& o : outcomes.of_job(1)) REQUIRE(job1.insert(o.chunk).second);
  for (const ChunkOutcome& o : outcomes.of_job(2)) REQUIRE(job2.insert(o.chunk).second);
  CHECK(job2.size() == n);
  CHECK(job1.size() < n);  // only those already taken off the queue
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
