// The stall rule (scheduler/stall.h): how long a worker holding work may report nothing.
#include <catch2/catch.hpp>

#include "scheduler/stall.h"

using namespace psched;

TEST_CASE("a worker of short chunks stalls after --stall-timeout and one of long chunks after ten of its "
          "chunks and report intervals", "[stall]") {
  // 100 x 100 chunks at a CPU thread's ~1 ns an element: 10 us a chunk, far below the timeout.
  CHECK(stall_bound_seconds(10, 10000, 1e-9, 0.005) == 10);
  // 10^10-element chunks at 1 ns: 10 s each, so 10 x (10 + 0.125) s.
  CHECK(stall_bound_seconds(10, 10000000000, 1e-9, 0.125) == Approx(101.25));
  // Unmeasured: 10 ns an element, so a first chunk however big is given its time.
  CHECK(stall_bound_seconds(5, 1000000000, 0, 0.005) == Approx(10 * (10 + 0.005)));
  CHECK(stall_bound_seconds(5, 10000, 0, 0.005) == 5);
}
