// ReportPacer (net/report_pacer.h): when a worker sends what finished. Pure: times are given.
#include <catch2/catch.hpp>

#include <chrono>

#include "net/report_pacer.h"

using namespace psched;
using namespace std::chrono_literals;

TEST_CASE("a report is due at half of what was held, after the interval, or when nothing is held", "[pacer]") {
  ReportPacer p;
  const auto t0 = ReportPacer::Clock::time_point{} + 1h;
  p.on_task_batch(10000, /*queue_empty=*/false);
  p.assigned(8, t0);
  p.released(1);
  CHECK_FALSE(p.due(t0 + 1ms));  // the interval counts from the work's start, not from long ago
  p.released(3);
  CHECK(p.due(t0 + 1ms));  // half done: the scheduler must top it up before it runs dry
  p.reported(t0 + 1ms);
  p.released(1);
  CHECK_FALSE(p.due(t0 + 2ms));
  CHECK(p.due(t0 + 11ms));  // the interval passed
  p.released(3);
  CHECK(p.due(t0 + 2ms));  // nothing held
}

TEST_CASE("when the scheduler's queue was empty, half is not reason enough to report", "[pacer]") {
  ReportPacer p;
  const auto t0 = ReportPacer::Clock::time_point{} + 1h;
  p.on_task_batch(10000, /*queue_empty=*/true);
  p.assigned(10, t0);
  CHECK(p.deadline() == t0 + 10ms);
  p.released(9);
  CHECK_FALSE(p.due(t0 + 6ms));  // 9 of 10 done: no top-up would come of a report
  CHECK(p.due(t0 + 10ms));       // the interval still holds
  p.released(1);
  CHECK(p.due(t0 + 7ms));  // nothing more held: the last result never waits
  // The next batch says work is queued again: half counts again.
  p.reported(t0 + 7ms);
  p.on_task_batch(10000, /*queue_empty=*/false);
  p.assigned(4, t0 + 7ms);
  p.released(2);
  CHECK(p.due(t0 + 8ms));
}

TEST_CASE("first_due finds the chunk after which due() first holds, as walking the chunks one by one does",
          "[pacer]") {
  const auto t0 = ReportPacer::Clock::time_point{} + 1h;
  uint64_t state = 12345;
  auto next = [&state](uint64_t below) {  // a fixed LCG: the same cases every run
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % below;
  };
  for (int i = 0; i < 20000; ++i) {
    ReportPacer p;
    p.on_task_batch(uint32_t(1 + next(20000)), /*queue_empty=*/next(4) == 0);
    const uint64_t high = next(300);
    p.assigned(high, t0);
    p.released(next(high + 1));
    const auto first_done = t0 + std::chrono::nanoseconds(next(30000000));
    const double chunk_seconds = next(8) == 0 ? 0.0 : double(next(100000)) * 1e-9 + 1e-12 * double(next(1000));
    const uint64_t n = next(400);
    // Walking the chunks one by one, as the worker does.
    uint64_t walked = n;
    ReportPacer w = p;
    for (uint64_t j = 0; j < n; ++j) {
      w.released(1);
      if (w.due(ReportPacer::done_at(first_done, chunk_seconds, j))) {
        walked = j;
        break;
      }
    }
    INFO("case " << i << ": held " << p.held() << " of " << p.high() << ", halves " << p.halves() << ", n " << n
                 << ", chunk " << chunk_seconds << " s");
    REQUIRE(p.first_due(n, first_done, chunk_seconds) == walked);
  }
}
