// The CPU backend's stored chunks read and reduced in pieces of rows (worker/cpu/reduce.cpp,
// kReducePieceBytes): every chunk's sum exact, its min and max, against the selected elements
// added up here one by one, for chunks many pieces big and edge chunks, row steps that put one
// selected row or several in a piece and rows wider than a piece, column selections, an
// expression, int64 past 2^53 (what rounding to doubles lost, added back piece by piece), float32,
// an npy stack whose chunks cross its files, a Fortran-order file (read whole) and Zarr stores
// (zstd read whole, uncompressed and blosc in pieces; decoded straight into the job's chunk where
// it can be); each chunk cut in bands and merged (the CPU backend's threads sharing a chunk); and
// the file a chunk's first piece opened read by its later pieces, a new chunk's opened afresh.
// Each read by pread, through the file's mapping, and both (ReadWays).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/exact_sum.h"
#include "core/generators.h"
#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "storage/zarr.h"
#include "tests/support/stored_files.h"
#include "worker/cpu/reduce.h"

using namespace psched;
using namespace psched::stored_test;

namespace {

// The array's elements as doubles, row-major, and each int64 element exactly (for the reference).
struct Elements {
  uint64_t rows, cols;
  std::vector<double> value;
  std::vector<int64_t> int64;  // int64 arrays only
};

void require_exact_chunks(const JobSpec& given, const Elements& e, ReadWays::Policy policy);

// Every chunk of s reduced by the backend against the selected elements of `e` added one by one,
// its pieces read by pread, reduced in the file's mapping (flat float64 files: ChunkReader::views),
// and each way in turn as a reader choosing between them takes them (the first pieces of a chunk
// read one way and the next the other).
void require_exact_chunks(const JobSpec& given, const Elements& e) {
  for (const auto policy : {ReadWays::Policy::kPread, ReadWays::Policy::kMap, ReadWays::Policy::kChoose}) {
    INFO("read way policy " << int(policy));
    require_exact_chunks(given, e, policy);
  }
}

void require_exact_chunks(const JobSpec& given, const Elements& e, ReadWays::Policy policy) {
  const Status valid = validate(given);
  INFO(valid.message());
  REQUIRE(valid.is_ok());
  const JobSpec s = normalized(given);
  ChunkReader reader;
  reader.ways() = ReadWays(policy, 0);  // small files mapped too
  std::vector<double> scratch;
  for (uint64_t chunk = 0; chunk < s.chunks(); ++chunk) {
    INFO("chunk " << chunk);
    const ChunkBox box = s.grid().box(chunk);
    const AxisRun rows = select_axis(box.row0, box.row0 + box.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
    const AxisRun cols = select_axis(box.col0, box.col0 + box.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);
    ExactSum want;
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (uint64_t i = 0; i < rows.count; ++i)
      for (uint64_t j = 0; j < cols.count; ++j) {
        const uint64_t at = (rows.first + i * s.row_sel.step) * e.cols + cols.first + j * s.col_sel.step;
        const double v = mul_add_rounded(s.scale, e.value[at], s.offset);
        if (!e.int64.empty()) {  // x itself: the integer, exactly (two doubles: v and what it lost)
          want.add(v);
          want.add(double(__int128(e.int64[at]) - __int128(v)));
        } else {
          want.add(v);
        }
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    PartialSum got;
    const Status st = reduce_stored_chunk_cpu(s, chunk, reader, scratch, got);
    INFO(st.message());
    REQUIRE(st.is_ok());
    CHECK(got.count == rows.count * cols.count);
    CHECK(same_value(got.exact, want));
    if (got.count > 0) {
      CHECK(got.min == lo);
      CHECK(got.max == hi);
    }
    // Cut in bands of rows as the CPU backend shares a chunk among threads (bands of about 64 KiB
    // and 300 KiB: one row or more each, several pieces each), merged in reverse: the same bits.
    for (const uint64_t band_bytes : {uint64_t{64} << 10, uint64_t{300} << 10}) {
      const uint32_t bands = stored_bands(s, chunk, band_bytes);
      INFO(bands << " bands of " << band_bytes << " bytes");
      const uint64_t rows_per_band = std::max<uint64_t>(1, band_bytes / (box.cols * sizeof(double)));
      if (s.stored.kind == SourceKind::kZarr || s.stored.fortran_order) CHECK(bands == 1);
      else CHECK(bands == std::min<uint64_t>(1024, (box.rows + rows_per_band - 1) / rows_per_band));
      PartialSum merged;
      ChunkBuffer buffer;
      uint64_t rows_covered = 0;
      for (uint32_t b = bands; b-- > 0;) {
        const ChunkBox band = stored_band(s, chunk, b, bands);
        CHECK(band.row0 == box.row0 + box.rows * b / bands);
        rows_covered += band.rows;
        PartialSum part;
        const Status bs = reduce_stored_band_cpu(s, chunk, band, reader, buffer, part);
        INFO(bs.message());
        REQUIRE(bs.is_ok());
        merge(merged, part);
      }
      CHECK(rows_covered == box.rows);
      CHECK(same_bits(merged, got));
    }
  }
}

template <typename T>
Elements elements_of(const std::vector<T>& stored, uint64_t rows, uint64_t cols) {
  Elements e{rows, cols, std::vector<double>(stored.begin(), stored.end()), {}};
  if constexpr (std::is_same_v<T, int64_t>) e.int64 = stored;
  return e;
}

}  // namespace

TEST_CASE("stored chunks read and reduced in pieces of rows sum exactly", "[cpu][stored]") {
  TempDir dir("psched_pieces_");
  std::mt19937_64 rng(20261129);
  std::normal_distribution<double> normal(10, 1);

  // float64, 700 x 1000 (5.6 MB) in 300 x 700 chunks (1.7 MB, under two pieces) and whole-width
  // 350-row chunks (2.8 MB: pieces of 13 rows), rows stepped 1, 3 and 20.
  {
    const uint64_t rows = 700, cols = 1000;
    std::vector<double> x(rows * cols);
    for (double& v : x) v = normal(rng);
    write_bytes(dir.path / "f64.npy", npy_header({DType::kFloat64, false}, false, {rows, cols}) + bytes_of(x));
    const Elements e = elements_of(x, rows, cols);
    for (uint64_t chunk_rows : {uint64_t{350}, uint64_t{300}, uint64_t{700}}) {
      for (uint64_t step : {uint64_t{1}, uint64_t{3}, uint64_t{20}}) {
        INFO("chunk rows " << chunk_rows << ", row step " << step);
        JobSpec s = opened(dir.path / "f64.npy", chunk_rows, chunk_rows == 300 ? 700 : cols);
        s.row_sel = Slice{1, kToEnd, step};
        s.col_sel = Slice{0, kToEnd, 2};
        s.scale = -3;
        s.offset = 1;
        require_exact_chunks(s, e);
      }
    }
  }
  // Rows wider than a piece (150000 float32 columns, 1.2 MB as doubles): a piece is one row.
  {
    const uint64_t rows = 9, cols = 150000;
    std::vector<float> x(rows * cols);
    for (float& v : x) v = float(normal(rng));
    write_bytes(dir.path / "wide.npy", npy_header({DType::kFloat32, false}, false, {rows, cols}) + bytes_of(x));
    JobSpec s = opened(dir.path / "wide.npy", 9, cols);
    s.row_sel = Slice{0, kToEnd, 2};
    require_exact_chunks(s, elements_of(x, rows, cols));
  }
  // int64 past 2^53, every element selected: what rounding lost is added back in every piece.
  {
    const uint64_t rows = 600, cols = 1000;
    std::vector<int64_t> x(rows * cols);
    for (int64_t& v : x) v = int64_t(rng() >> 1) - (int64_t{1} << 61);
    write_bytes(dir.path / "i64.npy", npy_header({DType::kInt64, false}, false, {rows, cols}) + bytes_of(x));
    require_exact_chunks(opened(dir.path / "i64.npy", 600, 1000), elements_of(x, rows, cols));
  }
  // An npy stack of three files (400, 250 and 350 rows of 1000), chunks of 500 rows crossing them.
  {
    fs::create_directories(dir.path / "stack");
    std::vector<double> all;
    uint64_t rows = 0;
    int k = 0;
    for (uint64_t n : {400, 250, 350}) {
      std::vector<double> x(n * 1000);
      for (double& v : x) v = normal(rng);
      write_bytes(dir.path / "stack" / (std::to_string(k++) + ".npy"),
                  npy_header({DType::kFloat64, false}, false, {n, 1000}) + bytes_of(x));
      all.insert(all.end(), x.begin(), x.end());
      rows += n;
    }
    JobSpec s = opened(dir.path / "stack", 500, 1000);
    s.row_sel = Slice{2, kToEnd, 7};
    require_exact_chunks(s, elements_of(all, rows, 1000));
  }
  // Read whole: a Fortran-order file and a Zarr store with chunks over two pieces.
  {
    const uint64_t rows = 500, cols = 800;
    std::vector<double> x(rows * cols);  // row-major values, stored column by column
    for (double& v : x) v = normal(rng);
    std::vector<double> by_column(rows * cols);
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) by_column[c * rows + r] = x[r * cols + c];
    write_bytes(dir.path / "fortran.npy",
                npy_header({DType::kFloat64, false}, true, {rows, cols}) + bytes_of(by_column));
    JobSpec s = opened(dir.path / "fortran.npy", 500, 800);
    s.row_sel = Slice{0, kToEnd, 3};
    require_exact_chunks(s, elements_of(x, rows, cols));

    // Zarr stores of the same elements: chunks as wide as the job's (decoded, or read when not
    // compressed, straight into the job's chunk where every row is selected; uncompressed and
    // blosc ones in pieces of rows, a blosc piece decoding its own blocks) and half as wide
    // (whole, through the staging), every row selected or every other.
    for (const auto& [store_cols, compressor] : {std::pair{uint64_t{800}, Compressor::kZstd},
                                                 std::pair{uint64_t{400}, Compressor::kZstd},
                                                 std::pair{uint64_t{800}, Compressor::kNone},
                                                 std::pair{uint64_t{800}, Compressor::kBlosc},
                                                 std::pair{uint64_t{400}, Compressor::kBlosc}}) {
      ZarrMeta m;
      m.type = {DType::kFloat64, false};
      m.shape = {rows, cols};
      m.chunks = {250, store_cols};
      m.compressor = compressor;
      const fs::path store =
          dir.path / ("f64-" + std::to_string(store_cols) + "-" + compressor_name(compressor) + ".zarr");
      fs::create_directories(store);
      write_bytes(store / ".zarray", zarray_json(m));
      for (uint64_t i = 0; i < 2; ++i)
        for (uint64_t j = 0; j < cols / store_cols; ++j) {
          std::vector<double> part(250 * store_cols);
          for (uint64_t r = 0; r < 250; ++r)
            for (uint64_t c = 0; c < store_cols; ++c)
              part[r * store_cols + c] = x[(i * 250 + r) * cols + j * store_cols + c];
          std::string encoded;
          REQUIRE(zarr_encode(m, part.data(), part.size() * sizeof(double), encoded).is_ok());
          write_bytes(store / (std::to_string(i) + "." + std::to_string(j)), encoded);
        }
      for (const uint64_t step : {uint64_t{1}, uint64_t{2}}) {
        INFO("store chunks 250 x " << store_cols << ", " << compressor_name(compressor) << ", row step " << step);
        JobSpec z = opened(store, 500, 800);
        z.row_sel = Slice{0, kToEnd, step};
        require_exact_chunks(z, elements_of(x, rows, cols));
      }
    }
  }
}

TEST_CASE("a chunk's later pieces read the file its first piece opened, the next chunk opens it afresh") {
  // A careful writer replaces a file by renaming a new one over it: a chunk begun on the old file
  // ends on it (ChunkReader::Piece::kLater keeps the descriptor), the next chunk reads the new one.
  TempDir dir("psched-reader-pieces-");
  const auto write = [&](const fs::path& p, double value) {
    const std::vector<double> elements(320, value);
    write_bytes(p, npy_header({DType::kFloat64, false}, false, {40, 8}) + bytes_of(elements));
  };
  write(dir.path / "x.npy", 1.0);
  write(dir.path / "new.npy", 2.0);
  const JobSpec s = normalized(opened(dir.path / "x.npy", 20, 8));
  ChunkReader reader;
  const auto piece = [&](uint64_t chunk, uint64_t row0, ChunkReader::Piece which) {
    std::vector<double> out(10 * 8, -1.0);
    const ChunkBox box{row0, 10, 0, 8};
    const Status st = reader.read(s, chunk, box, AxisRun{row0, 10}, AxisRun{0, 8}, out.data(), nullptr,
                                  ElementForm::kFloat64, which);
    REQUIRE(st.is_ok());
    REQUIRE(std::all_of(out.begin(), out.end(), [&](double v) { return v == out[0]; }));
    return out[0];
  };
  CHECK(piece(0, 0, ChunkReader::Piece::kFirst) == 1.0);
  fs::rename(dir.path / "new.npy", dir.path / "x.npy");
  CHECK(piece(0, 10, ChunkReader::Piece::kLater) == 1.0);
  CHECK(piece(1, 20, ChunkReader::Piece::kFirst) == 2.0);
  CHECK(piece(1, 30, ChunkReader::Piece::kLater) == 2.0);
}

TEST_CASE("zeros of both signs: the min and max have the same bits on every chunking, bands and offset -0.0 too",
          "[cpu][stored]") {
  // 2 x + (-0.0) was -0.0 for x = -0.0 and +0.0 for x = +0.0, and a max of zeros took the sign of
  // whichever the chunking met first. normalized() makes the offset +0.0, so every zero is +0.0.
  TempDir dir("psched-signed-zeros-");
  std::vector<double> x(64 * 64, -1.0);
  for (const auto& [at, v] : {std::pair{3 * 64 + 5, 0.0}, {10 * 64 + 10, -0.0}, {40 * 64 + 7, -0.0}, {63 * 64, 0.0}})
    x[size_t(at)] = v;
  write_bytes(dir.path / "z.npy", npy_header({DType::kFloat64, false}, false, {64, 64}) + bytes_of(x));
  for (const uint64_t chunk_rows : {uint64_t{64}, uint64_t{8}, uint64_t{3}, uint64_t{1}}) {
    INFO(chunk_rows << "-row chunks");
    JobSpec given = opened(dir.path / "z.npy", chunk_rows, 64);
    given.scale = 2;
    given.offset = -0.0;
    REQUIRE(validate(given).is_ok());
    const JobSpec s = normalized(given);
    CHECK_FALSE(std::signbit(s.offset));
    ChunkReader reader;
    std::vector<double> scratch;
    PartialSum total;
    for (uint64_t chunk = 0; chunk < s.chunks(); ++chunk) {
      PartialSum p;
      REQUIRE(reduce_stored_chunk_cpu(s, chunk, reader, scratch, p).is_ok());
      merge(total, p);
    }
    CHECK(total.max == 0.0);
    CHECK_FALSE(std::signbit(total.max));
    CHECK(total.min == -2.0);
  }
}
