// The one-pass kernels' selection test (worker/cuda/axis_pick.h, run on the device by one_pass.cu)
// against the selection's definition: a box-local index is picked exactly when its global index is
// start + k step below stop, for boxes anywhere on the axis, steps of 1, 2, any other, and past
// 2^31, and selections that miss the box.
#include <catch2/catch.hpp>

#include <cstdint>

#include "core/chunk_grid.h"
#include "worker/cuda/axis_pick.h"

using namespace psched;

namespace {

bool selected(uint64_t index, uint64_t start, uint64_t stop, uint64_t step) {
  return index >= start && index < stop && (index - start) % step == 0;
}

}  // namespace

TEST_CASE("a box's axis pick selects exactly the slice's indices in the box", "[cuda][axis_pick]") {
  uint64_t checked = 0, picked = 0;
  for (uint64_t lo : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{1} << 33}) {
    for (uint64_t length : {1, 2, 9, 64, 77}) {
      for (uint64_t start : {uint64_t{0}, uint64_t{1}, uint64_t{5}, lo, lo + 3, lo + 100}) {
        for (uint64_t stop_from_lo : {uint64_t{0}, uint64_t{4}, uint64_t{50}, uint64_t{1000}}) {
          const uint64_t stop = lo + stop_from_lo;
          for (uint64_t step : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7}, uint64_t{64},
                                (uint64_t{1} << 31) - 1, uint64_t{1} << 31, (uint64_t{1} << 32) + 3,
                                uint64_t{1} << 63}) {
            const AxisRun run = select_axis(lo, lo + length, start, stop, step);
            const gpu::AxisPick pick = gpu::pick_of(run, lo, step);
            for (uint64_t i = 0; i < length; ++i) {
              const bool want = selected(lo + i, start, stop, step);
              INFO("box at " << lo << " of " << length << ", slice " << start << ":" << stop << ":" << step
                             << ", index " << i);
              REQUIRE(pick(uint32_t(i)) == want);
              ++checked;
              picked += want;
            }
          }
        }
      }
    }
  }
  CHECK(checked == 5 * 153 * 6 * 4 * 9);
  CHECK(picked > 1000);  // the cases select something
}
