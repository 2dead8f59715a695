// The CPU backend taking big stored chunks a band of rows at a time (CpuBackendOptions::band_bytes),
// so that a job's last chunks are shared by every thread: each chunk reported once, with the bits
// of the chunk reduced whole, on 1 to 4 threads; a chunk whose first bands are taken is started
// (give_back leaves it, and it still reports), every other chunk given back or reported, never
// both; a chunk whose file went away fails with the reader's message, once.
#include <catch2/catch.hpp>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <vector>

#include "core/chunk_range.h"
#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "tests/support/stored_files.h"
#include "worker/cpu/cpu_backend.h"
#include "worker/cpu/reduce.h"

using namespace psched;
using namespace psched::stored_test;

namespace {

// What a backend reported, chunk by chunk, and a wait for a number of reports.
struct Reports {
  std::mutex mutex;
  std::condition_variable changed;
  std::map<uint64_t, std::vector<ChunkOutcome>> by_chunk;
  size_t total = 0;

  void add(ChunkOutcome o) {
    std::lock_guard<std::mutex> lock(mutex);
    by_chunk[o.chunk].push_back(std::move(o));
    ++total;
    changed.notify_all();
  }
  void add_all(std::vector<ChunkOutcome>& done) {
    for (ChunkOutcome& o : done) add(std::move(o));
  }
  void wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return total >= n; });
  }
};

// A 600 x 1000 float64 .npy of normal(10, 1) in 100-row chunks (800 KB each: 13 bands of 64 KiB,
// 7 or 8 rows), rows and columns `::3` selected, an expression.
JobSpec banded_job(const TempDir& dir) {
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> normal(10, 1);
  std::vector<double> x(600 * 1000);
  for (double& v : x) v = normal(rng);
  write_bytes(dir.path / "x.npy", npy_header({DType::kFloat64, false}, false, {600, 1000}) + bytes_of(x));
  JobSpec s = opened(dir.path / "x.npy", 100, 1000);
  s.row_sel = Slice{1, kToEnd, 3};
  s.col_sel = Slice{0, kToEnd, 3};
  s.scale = 2;
  s.offset = -1;
  REQUIRE(validate(s).is_ok());
  return normalized(s);
}

PartialSum whole_chunk(const JobSpec& s, uint64_t chunk) {
  ChunkReader reader;
  std::vector<double> scratch;
  PartialSum p;
  REQUIRE(reduce_stored_chunk_cpu(s, chunk, reader, scratch, p).is_ok());
  return p;
}

}  // namespace

TEST_CASE("the CPU backend shares a big stored chunk's bands among its threads: each chunk once, the whole "
          "chunk's bits",
          "[cpu][stored]") {
  TempDir dir("psched_bands_");
  const auto spec = std::make_shared<const JobSpec>(banded_job(dir));
  REQUIRE(stored_bands(*spec, 0, uint64_t{64} << 10) > 10);
  for (const int threads : {1, 2, 4}) {
    INFO(threads << " threads");
    CpuBackendOptions options;
    options.threads = threads;
    options.band_bytes = uint64_t{64} << 10;
    auto backend = make_cpu_backend(options);
    Reports reports;
    backend->start([&](std::vector<ChunkOutcome>& done) { reports.add_all(done); });
    backend->enqueue_run(7, 0, spec->chunks(), spec);
    reports.wait_for(spec->chunks());
    backend->stop();
    REQUIRE(reports.by_chunk.size() == spec->chunks());
    for (const auto& [chunk, outcomes] : reports.by_chunk) {
      INFO("chunk " << chunk);
      REQUIRE(outcomes.size() == 1);
      REQUIRE(outcomes[0].ok);
      CHECK(outcomes[0].job_id == 7);
      CHECK(outcomes[0].busy_seconds > 0);
      CHECK(same_bits(expand(outcomes[0].partial), whole_chunk(*spec, chunk)));
    }
  }
}

TEST_CASE("a chunk whose first bands are taken is started: give_back leaves it and it reports, the rest are given "
          "back or reported, never both",
          "[cpu][stored]") {
  TempDir dir("psched_bands_back_");
  const auto spec = std::make_shared<const JobSpec>(banded_job(dir));
  const uint64_t chunks = spec->chunks();
  // Given back from the callback of the first chunk reported, while the other threads go on with
  // the next chunk's bands (taken or not yet: both must hold the rule; one thread has taken none),
  // for several ranges, on four threads three times.
  for (const auto& [first, count] : {std::pair<uint64_t, uint64_t>{0, 6}, {2, 3}, {1, 1}, {3, 10}, {1, 2}}) {
    for (const int threads : {1, 3, 4, 4, 4}) {
      INFO("give back [" << first << ", " << first + count << ") on " << threads << " threads");
      CpuBackendOptions options;
      options.threads = threads;
      options.band_bytes = uint64_t{64} << 10;
      auto backend = make_cpu_backend(options);
      Reports reports;
      std::vector<ChunkRange> given;
      std::once_flag once;
      backend->start([&](std::vector<ChunkOutcome>& done) {
        std::call_once(once, [&] { given = backend->give_back(7, first, count); });
        reports.add_all(done);
      });
      backend->enqueue_run(7, 0, chunks, spec);
      // Every chunk is reported or was given back: wait for the reports the give-back leaves.
      {
        std::unique_lock<std::mutex> lock(reports.mutex);
        reports.changed.wait(lock, [&] {
          uint64_t back = 0;
          for (const ChunkRange& r : given) back += r.count;
          return reports.total > 0 && reports.total + back >= chunks;
        });
      }
      backend->stop();
      std::vector<int> seen(chunks, 0);
      for (const ChunkRange& r : given)
        for (uint64_t c = r.first; c < r.first + r.count; ++c) {
          CHECK(c >= first);
          CHECK(c < first + count);
          ++seen[c];
        }
      for (const auto& [chunk, outcomes] : reports.by_chunk) {
        INFO("chunk " << chunk);
        CHECK(outcomes.size() == 1);
        CHECK(outcomes[0].ok);
        CHECK(same_bits(expand(outcomes[0].partial), whole_chunk(*spec, chunk)));
        seen[chunk] += int(outcomes.size());
      }
      for (uint64_t c = 0; c < chunks; ++c) {
        INFO("chunk " << c);
        CHECK(seen[c] == 1);
      }
    }
  }
}

TEST_CASE("a shared chunk whose file went away fails once, with the reader's message", "[cpu][stored]") {
  TempDir dir("psched_bands_gone_");
  const auto spec = std::make_shared<const JobSpec>(banded_job(dir));
  fs::remove(dir.path / "x.npy");
  CpuBackendOptions options;
  options.threads = 3;
  options.band_bytes = uint64_t{64} << 10;
  auto backend = make_cpu_backend(options);
  Reports reports;
  backend->start([&](std::vector<ChunkOutcome>& done) { reports.add_all(done); });
  backend->enqueue_run(7, 0, 2, spec);
  reports.wait_for(2);
  backend->stop();
  REQUIRE(reports.by_chunk.size() == 2);
  for (const auto& [chunk, outcomes] : reports.by_chunk) {
    INFO("chunk " << chunk);
    REQUIRE(outcomes.size() == 1);
    CHECK_FALSE(outcomes[0].ok);
    CHECK(outcomes[0].error.find("chunk " + std::to_string(chunk)) != std::string::npos);
    CHECK(outcomes[0].error.find("x.npy") != std::string::npos);
  }
}
