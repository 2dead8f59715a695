// The threads a ChunkReader keeps for the pieces of its big reads (storage/read_pool.h): every
// piece run once, on the caller's thread for piece 0, run after run; and a reader with several
// threads reads a file of more than ChunkReader::kParallelReadBytes exactly as a reader with one.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

#include "storage/chunk_reader.h"
#include "storage/npy.h"
#include "storage/read_pool.h"
#include "tests/support/stored_files.h"

using namespace psched;
using namespace psched::stored_test;

TEST_CASE("a read pool runs every piece once, piece 0 on the caller's thread, run after run", "[stored]") {
  ReadPool pool(3);
  for (unsigned pieces : {1u, 2u, 4u, 3u, 4u}) {
    std::vector<std::atomic<int>> ran(pieces);
    std::thread::id first;
    pool.run(pieces, [&](unsigned k) {
      ++ran[k];
      if (k == 0) first = std::this_thread::get_id();
    });
    for (unsigned k = 0; k < pieces; ++k) CHECK(ran[k] == 1);
    CHECK(first == std::this_thread::get_id());
  }
}

TEST_CASE("a reader with several threads reads a big file as a reader with one does", "[stored]") {
  TempDir dir("psched-read-pool-");
  const uint64_t rows = 2500, cols = 1000;  // 20 MB: over kParallelReadBytes
  std::vector<double> x(rows * cols);
  for (uint64_t i = 0; i < x.size(); ++i) x[i] = double(i) * 0.5;
  write_bytes(dir.path / "x.npy", npy_header({DType::kFloat64, false}, false, {rows, cols}) + bytes_of(x));
  const JobSpec s = normalized(opened(dir.path / "x.npy", rows, cols));
  REQUIRE(rows * cols * sizeof(double) > ChunkReader::kParallelReadBytes);
  ChunkReader reader;
  reader.set_read_threads(4);
  std::vector<double> out(rows * cols, -1.0);
  const Status st = reader.read(s, 0, ChunkBox{0, rows, 0, cols}, AxisRun{0, rows}, AxisRun{0, cols}, out.data(),
                                nullptr);
  INFO(st.message());
  REQUIRE(st.is_ok());
  CHECK(out == x);
}
