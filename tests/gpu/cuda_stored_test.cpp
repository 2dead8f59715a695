// Stored arrays on the GPU: chunks read from .npy files, npy stacks and Zarr stores (every codec)
// through the CUDA backend, narrow dtypes widened on the device, give the CPU backend's partials
// bit for bit (storage/chunk_reader.h reads
// both; the exact sum makes the order of additions irrelevant), sums of squares too, 64-bit integers
// past 2^53 included, and a file that cannot be read fails its chunk with the reader's line, never
// the device. Chunks copied from files' registered pages: cuda_registered_test.cpp.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_stored_support.h"
#include "gpu_test_support.h"
#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "storage/open.h"
#include "storage/zarr.h"
#include "tests/support/stored_files.h"

using namespace psched;
using namespace psched::gpu_test;
using namespace psched::stored_test;

TEST_CASE("stored arrays: the GPU reads every format and dtype to the CPU's bits", "[gpu][stored]") {
  auto backend = backend_with();
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261127);
  std::normal_distribution<double> normal(11, 1);
  uint64_t job = 1;

  write_normal_npy(dir.path / "f64.npy", 3001, 517, rng);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "f64.npy", 1000, 200), job++);
  {  // the DeepOps selection and expression over the file
    JobSpec s = opened(dir.path / "f64.npy", 700, 517);
    s.offset = 1;
    s.row_sel = Slice{0, kToEnd, 2};
    s.col_sel = Slice{0, kToEnd, 2};
    require_gpu_equals_cpu(*backend, outcomes, s, job++);
  }

  std::vector<float> f32(400 * 300);
  for (float& x : f32) x = float(normal(rng));
  write_bytes(dir.path / "f32f.npy", npy_header({DType::kFloat32, false}, true, {400, 300}) + bytes_of(f32));
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "f32f.npy", 128, 64), job++);

  std::vector<int64_t> i64(256 * 64);
  for (int64_t& x : i64) x = int64_t(rng());  // most past 2^53: the residual path
  write_bytes(dir.path / "i64.npy", npy_header({DType::kInt64, true}, false, {256, 64}) + [&] {
    std::string b = bytes_of(i64);
    for (size_t k = 0; k < b.size(); k += 8) std::reverse(b.begin() + long(k), b.begin() + long(k) + 8);
    return b;
  }());
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "i64.npy", 100, 30), job++);

  std::vector<uint8_t> u8(999 * 77);
  for (uint8_t& x : u8) x = uint8_t(rng());
  write_bytes(dir.path / "u8.npy", npy_header({DType::kUInt8, false}, false, {999, 77}) + bytes_of(u8));
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "u8.npy", 250, 77), job++);

  // A stack of three files, and Zarr stores of every codec with chunks left missing (fill value).
  write_normal_stack(dir.path / "stack", {100, 137, 174}, 90, rng);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "stack", 64, 45), job++);
  for (const char* codec : {"none", "zstd", "lz4", "zlib"}) {
    ZarrMeta m;
    m.type = {DType::kFloat64, false};
    m.shape = {500, 300};
    m.chunks = {128, 100};
    m.compressor = std::string(codec) == "none" ? Compressor::kNone
                   : std::string(codec) == "zstd" ? Compressor::kZstd
                                                  : Compressor::kBlosc;
    m.blosc_cname = codec;
    const fs::path store = dir.path / (std::string(codec) + ".zarr");
    fs::create_directories(store);
    write_bytes(store / ".zarray", zarray_json(m));
    for (uint64_t i = 0; i < 4; ++i)
      for (uint64_t j = 0; j < 3; ++j) {
        if (i == 2 && j == 1) continue;  // missing: the fill value
        std::vector<double> chunk(128 * 100);
        for (double& x : chunk) x = normal(rng);
        std::string encoded;
        REQUIRE(zarr_encode(m, chunk.data(), chunk.size() * 8, encoded).is_ok());
        write_bytes(store / (std::to_string(i) + "." + std::to_string(j)), encoded);
      }
    require_gpu_equals_cpu(*backend, outcomes, opened(store), job++);
    require_gpu_equals_cpu(*backend, outcomes, opened(store, 256, 300), job++);
  }
  backend->stop();
}

TEST_CASE("stored arrays: narrow dtypes go to the device as stored and widen there, to the CPU's bits",
          "[gpu][stored]") {
  // Every dtype the device widens itself (chunk_reader.h's stored_on_device), in both byte orders
  // and both layouts, under a selection and the expression; bools as any byte (nonzero is true).
  auto backend = backend_with();
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261129);
  uint64_t job = 1;
  struct File {
    const char* name;
    ElementType type;
    bool fortran;
    uint64_t rows, cols, chunk_rows, chunk_cols;
  };
  for (const File& f : {File{"i8.npy", {DType::kInt8, false}, false, 1000, 300, 256, 300},
                        File{"i16be.npy", {DType::kInt16, true}, false, 777, 129, 200, 64},
                        File{"i32f.npy", {DType::kInt32, false}, true, 300, 200, 100, 100},
                        File{"u16.npy", {DType::kUInt16, false}, false, 500, 500, 500, 250},
                        File{"u32be.npy", {DType::kUInt32, true}, false, 256, 256, 64, 256},
                        File{"f32be.npy", {DType::kFloat32, true}, false, 640, 480, 320, 480},
                        File{"bool.npy", {DType::kBool, false}, false, 900, 100, 300, 100}}) {
    INFO(f.name);
    std::string data(f.rows * f.cols * element_bytes(f.type.dtype), '\0');
    for (char& c : data) c = char(rng());
    if (f.type.dtype == DType::kFloat32)  // finite: big-endian bytes 3f 8x .. .., x in [1, 2)
      for (size_t k = 0; k < data.size(); k += 4) data[k] = char(0x3f), data[k + 1] = char(data[k + 1] | 0x80);
    write_bytes(dir.path / f.name, npy_header(f.type, f.fortran, {f.rows, f.cols}) + data);
    require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / f.name, f.chunk_rows, f.chunk_cols), job++);
    JobSpec s = opened(dir.path / f.name, f.chunk_rows, f.chunk_cols);
    s.row_sel = Slice{1, kToEnd, 2};
    s.col_sel = Slice{3, kToEnd, 3};
    s.scale = 0.5;
    s.offset = 1;
    require_gpu_equals_cpu(*backend, outcomes, s, job++);
  }
  ZarrMeta m;  // int8 in a blosc-zstd store, a chunk missing (its fill value)
  m.type = {DType::kInt8, false};
  m.shape = {400, 300};
  m.chunks = {128, 100};
  m.compressor = Compressor::kBlosc;
  m.blosc_cname = "zstd";
  m.fill_bits = 0x85;  // -123
  const fs::path store = dir.path / "i8.zarr";
  fs::create_directories(store);
  write_bytes(store / ".zarray", zarray_json(m));
  for (uint64_t i = 0; i < 4; ++i)
    for (uint64_t j = 0; j < 3; ++j) {
      if (i == 1 && j == 1) continue;
      std::string chunk(128 * 100, '\0');
      for (char& c : chunk) c = char(rng());
      std::string encoded;
      REQUIRE(zarr_encode(m, chunk.data(), chunk.size(), encoded).is_ok());
      write_bytes(store / (std::to_string(i) + "." + std::to_string(j)), encoded);
    }
  require_gpu_equals_cpu(*backend, outcomes, opened(store), job++);
  require_gpu_equals_cpu(*backend, outcomes, opened(store, 256, 300), job++);
  backend->stop();
}

TEST_CASE("stored arrays: a chunk the GPU worker cannot read fails with the reader's line", "[gpu][stored]") {
  auto backend = backend_with();
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::vector<double> v(100 * 100, 1.0);
  write_bytes(dir.path / "a.npy", npy_header({DType::kFloat64, false}, false, {100, 100}) + bytes_of(v));
  auto spec = prepared(opened(dir.path / "a.npy", 50, 100));
  fs::resize_file(dir.path / "a.npy", fs::file_size(dir.path / "a.npy") - 800);  // cut after the client looked
  backend->enqueue(ChunkTask{7, 0, spec});
  backend->enqueue(ChunkTask{7, 1, spec});
  REQUIRE(outcomes.wait_for(2, 7));
  for (const ChunkOutcome& o : outcomes.of_job(7)) {
    INFO(o.chunk << ": " << o.error);
    CHECK_FALSE(o.device_lost);
    if (o.chunk == 0) CHECK(o.ok);
    else CHECK((!o.ok && o.error.find("truncated") != std::string::npos && o.error.find("chunk 1") == 0));
  }
  backend->stop();
}

TEST_CASE("stored arrays: fill values among ordinary elements give the CPU's bits", "[gpu][stored]") {
  // netCDF's fill value (9.97e36) and its negative at 0.05 % of a normal(11, 1) array: each thread's
  // expansion that meets one hands back its terms and starts again (Expansion::add_or_empty), as a
  // CPU lane does; the sums, var and std stay exact and the same.
  auto backend = backend_with(CudaBackendOptions{});
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> normal(11, 1);
  std::vector<double> x(3000 * 500);
  for (size_t i = 0; i < x.size(); ++i) x[i] = i % 1999 == 5 ? (i % 2 ? 9.96921e36 : -9.96921e36) : normal(rng);
  write_bytes(dir.path / "fill.npy", npy_header({DType::kFloat64, false}, false, {3000, 500}) + bytes_of(x));
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "fill.npy", 1000, 500), 1);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "fill.npy", 3000, 500), 2);
  backend->stop();
}

TEST_CASE("stored arrays: a pinned limit of one chunk reads one at a time, to the CPU's bits", "[gpu][stored]") {
  CudaBackendOptions options;
  options.readers = 8;
  options.pinned_limit_bytes = 1000 * 200 * sizeof(double);  // one chunk's staging: the others wait
  auto backend = backend_with(options);
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261128);
  write_normal_npy(dir.path / "f64.npy", 5000, 400, rng);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "f64.npy", 1000, 200), 1);
  backend->stop();
}

TEST_CASE("stored arrays: chunks bigger than two staging pieces go to the device in pieces of rows, to the CPU's bits",
          "[gpu][stored]") {
  // Chunks of 40 MB and more (cuda_dispatch.cpp's kStagingPieceBytes: 2 MiB, two a slot): edge
  // chunks narrower than the full chunk's rows, row steps that put one selected row in a piece or
  // many, a Fortran-order file, 64-bit integers whose rounding the host measures piece by piece, a
  // stack whose chunks cross its files, and big Zarr chunks (staged whole).
  CudaBackendOptions options;
  options.readers = 4;
  auto backend = backend_with(options);
  Outcomes outcomes;
  backend->start(outcomes.callback());
  TempDir dir("psched-gpu-stored-");
  std::mt19937_64 rng(20261129);
  std::normal_distribution<double> normal(11, 1);
  uint64_t job = 1;

  write_normal_npy(dir.path / "f64.npy", 3000, 2500, rng);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "f64.npy", 2500, 2000), job++);
  for (const uint64_t step : {uint64_t{3}, uint64_t{1001}}) {
    JobSpec s = opened(dir.path / "f64.npy", 2500, 2000);
    s.offset = 1;
    s.row_sel = Slice{7, kToEnd, step};
    s.col_sel = Slice{0, kToEnd, 2};
    require_gpu_equals_cpu(*backend, outcomes, s, job++);
  }

  std::vector<float> f32(size_t(6000) * 4000);
  for (float& x : f32) x = float(normal(rng));
  write_bytes(dir.path / "f32f.npy", npy_header({DType::kFloat32, false}, true, {6000, 4000}) + bytes_of(f32));
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "f32f.npy", 5000, 2000), job++);

  std::vector<int64_t> i64(size_t(2500) * 2500);
  for (int64_t& x : i64) x = int64_t(rng());  // most past 2^53: the residual path
  write_bytes(dir.path / "i64.npy", npy_header({DType::kInt64, false}, false, {2500, 2500}) + bytes_of(i64));
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "i64.npy", 2200, 2500), job++);

  write_normal_stack(dir.path / "stack", {1500, 1507, 1514}, 2000, rng);
  require_gpu_equals_cpu(*backend, outcomes, opened(dir.path / "stack", 2500, 2000), job++);

  // Zarr stores in 1200 x 2000 chunks (19 MB as float64), staged whole (float64 straight into the
  // staging, int64 with its residual, float32 as stored); job chunks of one store chunk and of
  // two, rows stepped.
  const std::pair<DType, Compressor> stores[] = {{DType::kFloat64, Compressor::kBlosc},
                                                 {DType::kInt64, Compressor::kBlosc},
                                                 {DType::kFloat32, Compressor::kBlosc},
                                                 {DType::kFloat64, Compressor::kZstd}};
  for (const auto& [dtype, compressor] : stores) {
    ZarrMeta m;
    m.type = {dtype, false};
    m.shape = {3000, 2000};
    m.chunks = {1200, 2000};
    m.compressor = compressor;
    m.blosc_cname = "lz4";
    const fs::path store = dir.path / fmt::format("{}-{}.zarr", dtype_name(dtype), compressor_name(compressor));
    fs::create_directories(store);
    write_bytes(store / ".zarray", zarray_json(m));
    for (uint64_t i = 0; i < 3; ++i) {
      std::vector<double> x(1200 * 2000);
      for (double& v : x) v = normal(rng);
      std::string raw;
      if (dtype == DType::kFloat64) raw = bytes_of(x);
      if (dtype == DType::kFloat32) raw = bytes_of(std::vector<float>(x.begin(), x.end()));
      if (dtype == DType::kInt64) {
        std::vector<int64_t> n(x.size());
        for (int64_t& v : n) v = int64_t(rng());  // most past 2^53: the residual path
        raw = bytes_of(n);
      }
      std::string encoded;
      REQUIRE(zarr_encode(m, raw.data(), raw.size(), encoded).is_ok());
      write_bytes(store / (std::to_string(i) + ".0"), encoded);
    }
    INFO(store.filename().string());
    require_gpu_equals_cpu(*backend, outcomes, opened(store), job++);
    JobSpec s = opened(store, 2400, 2000);
    s.row_sel = Slice{5, kToEnd, 3};
    s.scale = 2;
    require_gpu_equals_cpu(*backend, outcomes, s, job++);
  }
  backend->stop();
}
