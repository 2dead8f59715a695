// What a run of consecutive chunks holds (row-major over the chunk grid), in O(1) however long the
// run: at most three rectangles of the array. Host only (the device works chunk by chunk). The
// scheduler checks a worker's partial of a run against it (scheduler/partial_check.h); the closed
// forms sum a run with it (core/closed_form.h).
#pragma once

#include <cstdint>

#include "core/chunk_grid.h"
#include "core/job_spec.h"

namespace psched {

// The run of `count` chunks from `first` as at most three rectangles of the array:
// `add(row0, rows, col0, cols)` for each (none empty), in order, until one returns false. Returns
// false then, else true.
template <typename Add>
bool for_each_run_rectangle(const ChunkGrid& g, uint64_t first, uint64_t count, Add&& add) {
  if (count == 0) return true;
  const uint64_t per_row = g.grid_cols();
  // A chunk row's chunks [c0, c1), for chunk rows [r0, r1): one rectangle of the array.
  auto rectangle = [&](uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1) {
    if (r0 >= r1 || c0 >= c1) return true;
    const uint64_t row0 = r0 * g.chunk_rows, col0 = c0 * g.chunk_cols;
    const uint64_t row_end = r1 * g.chunk_rows < g.rows ? r1 * g.chunk_rows : g.rows;
    const uint64_t col_end = c1 * g.chunk_cols < g.cols ? c1 * g.chunk_cols : g.cols;
    return add(row0, row_end - row0, col0, col_end - col0);
  };
  const uint64_t end = first + count, r_first = first / per_row, r_last = (end - 1) / per_row;
  const uint64_t c_first = first % per_row, c_end = (end - 1) % per_row + 1;
  return r_first == r_last ? rectangle(r_first, r_first + 1, c_first, c_end)
                           : rectangle(r_first, r_first + 1, c_first, per_row) &&
                                 rectangle(r_first + 1, r_last, 0, per_row) && rectangle(r_last, r_last + 1, 0, c_end);
}

// The selected elements in the run of `count` chunks from `first` of a normalized spec: what a
// worker's partial of that run must count, NaN elements included. The run must lie in the grid.
inline uint64_t selected_elements(const JobSpec& s, uint64_t first, uint64_t count) {
  uint64_t selected = 0;
  for_each_run_rectangle(s.grid(), first, count, [&](uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols) {
    selected += select_axis(row0, row0 + rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step).count *
                select_axis(col0, col0 + cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step).count;
    return true;
  });
  return selected;
}

}  // namespace psched
