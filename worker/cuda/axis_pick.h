// Which indices of a chunk's box the one-pass kernels (one_pass.cu) add: the selection along one
// axis as a test on a box-local index, in 32-bit arithmetic. Host and device share it (PSCHED_HD),
// so tests/worker/cuda_axis_pick_test.cpp holds the very code the kernels run to select_axis().
// Plain C++ where it is not compiled by nvcc.
#pragma once

#include <cstdint>

#include "core/chunk_grid.h"
#include "core/platform.h"

namespace psched::gpu {

// Whether box-local index i of an axis is selected: `count` indices from `first`, `step` apart.
// Within a box every index is below 2^31 (a chunk holds at most 2^31 elements), so a step of 2^31
// or more selects `first` alone, as does any step past the box.
struct AxisPick {
  uint32_t first, step, count;
  PSCHED_HD bool operator()(uint32_t i) const {
    if (i < first) return false;
    const uint32_t d = i - first;
    const uint32_t k = step == 1 ? d : step == 2 ? d >> 1 : d / step;
    return k < count && d == k * step;
  }
};

// The pick of `run` (select_axis() over a box's axis starting at global index lo), `step` apart.
PSCHED_HD AxisPick pick_of(const AxisRun& run, uint64_t lo, uint64_t step) {
  if (run.count == 0) return AxisPick{0, 1, 0};
  const uint64_t most = uint64_t{1} << 31;
  return AxisPick{uint32_t(run.first - lo), uint32_t(step < most ? step : most), uint32_t(run.count)};
}

}  // namespace psched::gpu
