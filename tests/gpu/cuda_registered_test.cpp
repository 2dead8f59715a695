// Stored arrays on the GPU copied from their files' registered pages (worker/cuda/registered_files.h):
// every flat kind and selection, float64 and narrow dtypes, registered by the dispatcher asking or
// by the registry's own thread while the backend is idle, a file renamed over, pages CUDA refuses,
// and a stack of more files than the process keeps mapped; every chunk to the CPU's bits
// (cuda_stored_support.h), whether copied from registered pages or staged.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_stored_support.h"
#include "gpu_test_support.h"
#include "storage/mapped_file.h"
#include "storage/npy.h"
#include "storage/open.h"
#include "tests/support/stored_files.h"
#include "worker/cuda/registered_files.h"

using namespace psched;
using namespace psched::gpu_test;
using namespace psched::stored_test;

namespace {

// Every file mapped whatever its size (PSCHED_TEST_READ_WAY=map), while it lives: read by the
// readers' threads as a backend starts them.
struct MapEveryFile {
  MapEveryFile() { ::setenv("PSCHED_TEST_READ_WAY", "map", 1); }
  ~MapEveryFile() { ::unsetenv("PSCHED_TEST_READ_WAY"); }
};

// Four readers, files registered in blocks of 1 MiB (a test's files are small).
CudaBackendOptions registering_in_mib_blocks() {
  CudaBackendOptions options;
  options.readers = 4;
  options.test_register_block_bytes = uint64_t{1} << 20;
  return options;
}

// A started backend, stopped when it goes.
struct Started {
  explicit Started(const CudaBackendOptions& options) : backend(backend_with(options)) {
    backend->start(outcomes.callback());
  }
  ~Started() { backend->stop(); }
  // The job checked against the CPU (twice: sums, then var/std); how many of its chunks were
  // copied from registered pages.
  uint64_t check(const JobSpec& spec, uint64_t job_id) {
    const uint64_t before = gpu::registered_chunk_copies();
    require_gpu_equals_cpu(*backend, outcomes, spec, job_id);
    return gpu::registered_chunk_copies() - before;
  }
  std::unique_ptr<Backend> backend;
  Outcomes outcomes;
};

}  // namespace

TEST_CASE("stored arrays: float64 files copied from their registered pages give the CPU's bits",
          "[gpu][stored][registered]") {
  // Every file mapped whatever its size (MapEveryFile), registered by the dispatcher asking
  // (test_register_at_once), in blocks of 1 MiB: rows of 68-160 KB, after the npy header's 128
  // bytes or a raw file's offset, make runs of rows inside a block (one 2D copy each) and rows
  // across a block's end (copied in two: cuda_dispatch.cpp's copy_registered), float64 and narrow
  // dtypes (copied as stored, widened on the device). Edge chunks narrower than
  // kMinRegisteredRowBytes, stack chunks across two files, and, under a limit of five blocks, all
  // but a file's first chunks go through the staging: jobs of both kinds of chunk.
  const MapEveryFile map_files;
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261130);
  write_normal_npy(dir.path / "wide.npy", 400, 20000, rng);  // 64 MB
  write_normal_stack(dir.path / "stack", {150, 157, 164}, 10000, rng);
  std::vector<double> raw(size_t(301) * 9001);
  std::normal_distribution<double> normal(11, 1);
  for (double& x : raw) x = normal(rng);
  write_bytes(dir.path / "f64.raw", std::string(8 * 3, '\0') + bytes_of(raw));  // 24 bytes before element 0
  auto raw_array = open_array(raw_input(dir.path / "f64.raw", "float64", {301, 9001}, 24));
  REQUIRE(raw_array.is_ok());
  std::vector<float> f32(size_t(300) * 20000);
  for (float& x : f32) x = float(normal(rng));
  write_bytes(dir.path / "f32.npy", npy_header({DType::kFloat32, false}, false, {300, 20000}) + bytes_of(f32));
  std::vector<int16_t> i16(size_t(200) * 40000);
  for (int16_t& x : i16) x = int16_t(rng());
  write_bytes(dir.path / "i16.raw", std::string(6, '\0') + bytes_of(i16));  // 6 bytes before element 0
  auto i16_array = open_array(raw_input(dir.path / "i16.raw", "int16", {200, 40000}, 6));
  REQUIRE(i16_array.is_ok());
  std::vector<uint8_t> u8(size_t(300) * 70000);
  for (uint8_t& x : u8) x = uint8_t(rng());
  write_bytes(dir.path / "u8.npy", npy_header({DType::kUInt8, false}, false, {300, 70000}) + bytes_of(u8));

  for (const uint64_t limit : {UINT64_MAX, uint64_t{5} << 20}) {
    INFO("register limit " << limit);
    CudaBackendOptions options = registering_in_mib_blocks();
    options.test_register_at_once = true;
    options.register_limit_bytes = limit;
    Started gpu(options);
    uint64_t job = 1, copied = 0;
    copied += gpu.check(opened(dir.path / "wide.npy", 4, 20000), job++);  // the first in the limit
    copied += gpu.check(opened(dir.path / "wide.npy", 100, 20000), job++);  // whole rows
    copied += gpu.check(opened(dir.path / "wide.npy", 150, 9000), job++);   // boxes, edges
    for (const uint64_t step : {uint64_t{3}, uint64_t{101}}) {
      JobSpec s = opened(dir.path / "wide.npy", 300, 10000);
      s.offset = 1;
      s.row_sel = Slice{7, kToEnd, step};
      s.col_sel = Slice{3, kToEnd, 2};
      copied += gpu.check(s, job++);
    }
    copied += gpu.check(opened(dir.path / "stack", 100, 10000), job++);
    JobSpec r = whole_array_job(*raw_array);
    r.chunk_rows = 40;
    r.scale = 3;
    copied += gpu.check(r, job++);
    // Narrow dtypes, copied as stored and widened on the device.
    copied += gpu.check(opened(dir.path / "f32.npy", 64, 20000), job++);
    JobSpec f32 = opened(dir.path / "f32.npy", 100, 17000);  // 68 KB rows, an edge chunk staged
    f32.row_sel = Slice{1, kToEnd, 2};
    copied += gpu.check(f32, job++);
    JobSpec i16 = whole_array_job(*i16_array);
    i16.chunk_rows = 33;
    copied += gpu.check(i16, job++);
    copied += gpu.check(opened(dir.path / "u8.npy", 50, 70000), job++);
    CHECK(copied > 0);
  }
}

TEST_CASE("stored arrays: a file's pages are registered while the backend is idle, then copied from, to the CPU's bits",
          "[gpu][stored][registered]") {
  // The registry's own thread (registered_files.h): a job's chunks ask for their blocks and go
  // through the staging; once the backend is idle the blocks are registered, and a later job is
  // copied from them. Jobs are run until one is (each checked), a few hundred at most.
  const MapEveryFile map_files;
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261201);
  write_normal_npy(dir.path / "wide.npy", 200, 20000, rng);  // 32 MB
  Started gpu(registering_in_mib_blocks());
  uint64_t job = 1, copied = 0;
  while (copied == 0 && job < 600) copied += gpu.check(opened(dir.path / "wide.npy", 50, 20000), job++);
  CHECK(copied > 0);
}

TEST_CASE("stored arrays: a file renamed over, or whose pages CUDA refuses to register, is read as it is now, to the CPU's bits",
          "[gpu][stored][registered]") {
  const MapEveryFile map_files;
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261202);
  const fs::path path = dir.path / "wide.npy";
  write_normal_npy(path, 200, 20000, rng);
  CudaBackendOptions options = registering_in_mib_blocks();
  options.test_register_at_once = true;
  uint64_t job = 1;
  {
    // Registered by the first job; a new file renamed over it (as a careful writer replaces one)
    // is a new mapping, registered afresh: the second job sums the new elements.
    Started gpu(options);
    CHECK(gpu.check(opened(path, 50, 20000), job++) > 0);
    write_normal_npy(dir.path / "new.npy", 200, 20000, rng);
    fs::rename(dir.path / "new.npy", path);
    gpu.check(opened(path, 50, 20000), job++);
  }
  // The file's pages already registered by someone else in this process: CUDA refuses the
  // backend's blocks ("already registered"), and every chunk goes through the staging.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  Status why;
  const auto map = map_file(path.string(), fd, st, why);  // the mapping the readers get
  ::close(fd);
  REQUIRE(map != nullptr);
  const uint64_t page = uint64_t(::sysconf(_SC_PAGESIZE));
  void* base = const_cast<unsigned char*>(map->data);
  REQUIRE(cudaHostRegister(base, (map->size + page - 1) / page * page, cudaHostRegisterReadOnly) == cudaSuccess);
  {
    Started gpu(options);
    CHECK(gpu.check(opened(path, 50, 20000), job++) == 0);
  }
  CHECK(cudaHostUnregister(base) == cudaSuccess);
}

TEST_CASE("stored arrays: an npy stack of more files than the process keeps mapped is copied from its registered pages",
          "[gpu][stored][registered]") {
  // 20 files, a chunk each: the process's mappings keep 16 (storage/mapped_file.cpp), so every job
  // maps each file again; the registry keeps the mapping it registered (the same file), and once
  // the backend has been idle every chunk of a job is copied from registered pages.
  const MapEveryFile map_files;
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261203);
  write_normal_stack(dir.path / "stack", std::vector<uint64_t>(20, 12), 20000, rng);  // 1.9 MB a file
  Started gpu(registering_in_mib_blocks());
  const JobSpec spec = opened(dir.path / "stack", 12, 20000);
  REQUIRE(spec.chunks() == 20);
  uint64_t job = 1, copied = 0;
  while (copied < 2 * 20 && job < 600) copied = gpu.check(spec, job++);  // a sum job and a var/std job each
  CHECK(copied == 2 * 20);
}
