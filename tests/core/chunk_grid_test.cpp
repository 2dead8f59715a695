#include <catch2/catch.hpp>

#include "core/chunk_grid.h"

using psched::ChunkGrid;
using psched::select_axis;

TEST_CASE("chunks are numbered row-major and edge chunks are smaller", "[chunk_grid]") {
  const ChunkGrid grid{10, 7, 4, 3};  // 3 x 3 chunks, ragged on both edges
  REQUIRE(grid.grid_rows() == 3);
  REQUIRE(grid.grid_cols() == 3);
  REQUIRE(grid.chunks() == 9);
  const auto first = grid.box(0);
  CHECK(first.row0 == 0);
  CHECK(first.rows == 4);
  CHECK(first.col0 == 0);
  CHECK(first.cols == 3);
  const auto right_edge = grid.box(2);
  CHECK(right_edge.col0 == 6);
  CHECK(right_edge.cols == 1);
  const auto bottom_right = grid.box(8);
  CHECK(bottom_right.row0 == 8);
  CHECK(bottom_right.rows == 2);
  CHECK(bottom_right.col0 == 6);
  CHECK(bottom_right.cols == 1);
}

TEST_CASE("a selection step that does not divide the chunk size picks the right elements", "[chunk_grid]") {
  // [1:20:3] selects 1, 4, 7, 10, 13, 16, 19; chunks of 4 along the axis.
  auto c0 = select_axis(0, 4, 1, 20, 3);
  CHECK(c0.first == 1);
  CHECK(c0.count == 1);
  auto c1 = select_axis(4, 8, 1, 20, 3);
  CHECK(c1.first == 4);
  CHECK(c1.count == 2);  // 4, 7
  auto c2 = select_axis(8, 12, 1, 20, 3);
  CHECK(c2.first == 10);
  CHECK(c2.count == 1);
  auto c4 = select_axis(16, 20, 1, 20, 3);
  CHECK(c4.first == 16);
  CHECK(c4.count == 2);  // 16, 19
}

TEST_CASE("a selection that stops before a chunk or starts after it selects nothing there", "[chunk_grid]") {
  CHECK(select_axis(8, 12, 0, 8, 1).count == 0);
  CHECK(select_axis(0, 4, 5, 9, 1).count == 0);
  CHECK(select_axis(0, 4, 4, 4, 1).count == 0);
}

TEST_CASE("per-chunk selection counts add up to the global count for every chunking", "[chunk_grid]") {
  for (uint64_t n : {1, 2, 7, 31, 100}) {
    for (uint64_t chunk : {1, 3, 4, 10, 128}) {
      for (uint64_t step : {1, 2, 3, 7}) {
        for (uint64_t start : {0, 1, 5}) {
          if (start > n) continue;
          const uint64_t global = select_axis(0, n, start, n, step).count;
          uint64_t total = 0;
          for (uint64_t lo = 0; lo < n; lo += chunk) {
            const auto run = select_axis(lo, std::min(lo + chunk, n), start, n, step);
            if (run.count) {
              CHECK((run.first - start) % step == 0);
              CHECK(run.first >= lo);
            }
            total += run.count;
          }
          CHECK(total == global);
        }
      }
    }
  }
}
