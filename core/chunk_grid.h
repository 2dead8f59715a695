// ChunkGrid: how an array is cut into chunks (row-major numbering over the grid, edge chunks
// smaller) and which elements of a chunk a strided selection picks. Host and device share it, so the
// CPU backend and the CUDA kernels agree on every chunk's elements by construction.
#pragma once

#include <cstdint>

#include "core/platform.h"

namespace psched {

// The selected indices of one axis inside [lo, hi): first, first + step, ... (count of them).
struct AxisRun {
  uint64_t first = 0;
  uint64_t count = 0;
};

// Selection start/stop/step (stop already clamped to the axis length) restricted to [lo, hi).
// Any step > 0 is allowed (a step past the axis selects only `start`), so nothing here may round
// up by adding step - 1: that wraps for steps near 2^64 and would pick indices outside [lo, hi).
PSCHED_HD AxisRun select_axis(uint64_t lo, uint64_t hi, uint64_t start, uint64_t stop,
                              uint64_t step) {
  AxisRun run;
  const uint64_t end = hi < stop ? hi : stop;
  uint64_t first = start;
  if (lo > start) {
    const uint64_t gap = lo - start;
    const uint64_t steps = gap / step + (gap % step != 0 ? 1 : 0);  // ceil(gap / step)
    if (steps > (UINT64_MAX - start) / step) return run;  // next selected index is past 2^64
    first = start + steps * step;
  }
  if (first >= end) return run;
  run.first = first;
  run.count = (end - first - 1) / step + 1;
  return run;
}

struct ChunkBox {
  uint64_t row0 = 0, rows = 0;  // global first row, number of rows
  uint64_t col0 = 0, cols = 0;
};

struct ChunkGrid {
  uint64_t rows = 0, cols = 0;
  uint64_t chunk_rows = 1, chunk_cols = 1;

  PSCHED_HD uint64_t grid_rows() const { return (rows + chunk_rows - 1) / chunk_rows; }
  PSCHED_HD uint64_t grid_cols() const { return (cols + chunk_cols - 1) / chunk_cols; }
  PSCHED_HD uint64_t chunks() const { return grid_rows() * grid_cols(); }

  PSCHED_HD ChunkBox box(uint64_t chunk) const {
    ChunkBox b;
    const uint64_t gr = chunk / grid_cols();
    const uint64_t gc = chunk % grid_cols();
    b.row0 = gr * chunk_rows;
    b.col0 = gc * chunk_cols;
    b.rows = (b.row0 + chunk_rows <= rows) ? chunk_rows : rows - b.row0;
    b.cols = (b.col0 + chunk_cols <= cols) ? chunk_cols : cols - b.col0;
    return b;
  }
};

}  // namespace psched
