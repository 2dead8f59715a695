// A stored array's chunk read as stored (ElementForm::kStored, the form a GPU widens itself: issue
// 44) holds exactly the elements read as doubles, in the host's byte order, at the same places:
// big-endian files swapped, Fortran order scattered, steps honoured, npy stacks and Zarr stores,
// and rows not selected left as they were.
#include <catch2/catch.hpp>


#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "storage/open.h"
#include "storage/zarr.h"
#include "tests/support/stored_files.h"

using namespace psched;
using namespace psched::stored_test;

namespace {

// n random elements of `bytes` bytes each (bools: any byte, as a writer may leave them).
std::string random_bytes(uint64_t n, uint64_t bytes, std::mt19937_64& rng) {
  std::string b(n * bytes, '\0');
  for (char& c : b) c = char(rng());
  return b;
}

// Every chunk read both ways: the stored bytes, widened on the host, are the doubles, bit for bit.
void require_forms_agree(const JobSpec& given) {
  REQUIRE(stored_on_device(given.dtype));
  const Status valid = validate(given);
  INFO(valid.message());
  REQUIRE(valid.is_ok());
  const JobSpec s = normalized(given);
  const uint64_t eb = element_bytes(s.dtype);
  ChunkReader as_doubles, as_stored;
  for (uint64_t chunk = 0; chunk < s.chunks(); ++chunk) {
    const ChunkBox box = s.grid().box(chunk);
    const AxisRun rows = select_axis(box.row0, box.row0 + box.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
    const AxisRun cols = select_axis(box.col0, box.col0 + box.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);
    const uint64_t n = box.rows * box.cols;
    std::vector<double> doubles(n, -7.0);
    std::vector<unsigned char> stored(n * eb, 0xA5);  // a pattern no unselected row may lose
    REQUIRE(as_doubles.read(s, chunk, box, rows, cols, doubles.data(), nullptr).is_ok());
    REQUIRE(as_stored.read(s, chunk, box, rows, cols, stored.data(), nullptr, ElementForm::kStored).is_ok());
    std::vector<double> widened(n);
    widen_elements(s.dtype, false, stored.data(), n, widened.data());
    for (uint64_t r = 0; r < box.rows; ++r) {
      const bool selected = rows.count > 0 && box.row0 + r >= rows.first &&
                            (box.row0 + r - rows.first) % s.row_sel.step == 0 &&
                            (box.row0 + r - rows.first) / s.row_sel.step < rows.count;
      for (uint64_t c = 0; c < box.cols; ++c) {
        const uint64_t at = r * box.cols + c;
        INFO("chunk " << chunk << " row " << box.row0 + r << " col " << box.col0 + c);
        if (selected) {
          CHECK(std::memcmp(&widened[at], &doubles[at], sizeof(double)) == 0);
        } else {
          CHECK(doubles[at] == -7.0);
          CHECK(std::all_of(stored.begin() + long(at * eb), stored.begin() + long((at + 1) * eb),
                            [](unsigned char b) { return b == 0xA5; }));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("a chunk read as stored holds the elements read as doubles, in the host's byte order") {
  TempDir dir("psched-reader-form-");
  std::mt19937_64 rng(20261128);
  struct File {
    const char* name;
    ElementType type;
    bool fortran;
    uint64_t rows, cols, chunk_rows, chunk_cols, row_step;
  };
  for (const File& f : {File{"i16be.npy", {DType::kInt16, true}, false, 301, 53, 100, 20, 2},
                        File{"f32be_fortran.npy", {DType::kFloat32, true}, true, 120, 37, 50, 37, 3},
                        File{"u32.npy", {DType::kUInt32, false}, false, 90, 64, 90, 64, 1},
                        File{"i8.npy", {DType::kInt8, false}, true, 77, 11, 30, 5, 1},
                        File{"bool.npy", {DType::kBool, false}, false, 64, 100, 17, 100, 2}}) {
    INFO(f.name);
    write_bytes(dir.path / f.name, npy_header(f.type, f.fortran, {f.rows, f.cols}) +
                                       random_bytes(f.rows * f.cols, element_bytes(f.type.dtype), rng));
    JobSpec s = opened(dir.path / f.name, f.chunk_rows, f.chunk_cols);
    s.row_sel = Slice{1, kToEnd, f.row_step};
    require_forms_agree(s);
  }

  // An npy stack of uint16 files, and a blosc-lz4 Zarr store of int32 with a chunk missing.
  fs::create_directories(dir.path / "stack");
  for (int k = 0; k < 3; ++k)
    write_bytes(dir.path / "stack" / (std::to_string(k) + ".npy"),
                npy_header({DType::kUInt16, false}, false, {uint64_t(40 + 9 * k), 30}) +
                    random_bytes(uint64_t(40 + 9 * k) * 30, 2, rng));
  require_forms_agree(opened(dir.path / "stack", 25, 30));

  ZarrMeta m;
  m.type = {DType::kInt32, false};
  m.shape = {200, 90};
  m.chunks = {64, 40};
  m.compressor = Compressor::kBlosc;
  m.blosc_cname = "lz4";
  const int32_t fill = -3;
  std::memcpy(&m.fill_bits, &fill, sizeof fill);
  const fs::path store = dir.path / "i32.zarr";
  fs::create_directories(store);
  write_bytes(store / ".zarray", zarray_json(m));
  for (uint64_t i = 0; i < 4; ++i)
    for (uint64_t j = 0; j < 3; ++j) {
      if (i == 1 && j == 2) continue;  // missing: the fill value
      const std::string chunk = random_bytes(64 * 40, 4, rng);
      std::string encoded;
      REQUIRE(zarr_encode(m, chunk.data(), chunk.size(), encoded).is_ok());
      write_bytes(store / (std::to_string(i) + "." + std::to_string(j)), encoded);
    }
  require_forms_agree(opened(store, 128, 80));
}
