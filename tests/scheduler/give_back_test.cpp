// The tail-splitting policy (scheduler/give_back.h) on its own, and the run cutting the backends
// give chunks back with (worker/run_queue.h cut_runs).
#include <catch2/catch.hpp>

#include <deque>

#include "scheduler/give_back.h"
#include "worker/run_queue.h"

using namespace psched;

TEST_CASE("give back: the holder whose share ends last is asked, if splitting gains enough", "[give_back]") {
  // 26 chunks at 40 ms on one thread (1.04 s) beats 10 chunks at 40 ms on 2 threads (0.2 s).
  const std::vector<TailHolder> holders{
      {.worker = 1, .job = 7, .chunks = 10, .parallelism = 2, .seconds_per_chunk = 0.04},
      {.worker = 2, .job = 7, .chunks = 26, .parallelism = 1, .seconds_per_chunk = 0.04},
  };
  const auto pick = pick_tail_holder(holders);
  REQUIRE(pick);
  CHECK(pick->worker == 2u);
  // Nothing queued beyond what it computes at once, no speed known, or too little to gain: nobody.
  CHECK_FALSE(pick_tail_holder({{.worker = 1, .job = 7, .chunks = 2, .parallelism = 2, .seconds_per_chunk = 1}}));
  CHECK_FALSE(pick_tail_holder({{.worker = 1, .job = 7, .chunks = 9, .parallelism = 1, .seconds_per_chunk = 0}}));
  CHECK_FALSE(pick_tail_holder({{.worker = 1, .job = 7, .chunks = 9, .parallelism = 1, .seconds_per_chunk = 1e-4}}));
  // An idle worker ten times slower would finish the half later than the holder does it all.
  CHECK_FALSE(pick_tail_holder(
      {{.worker = 1, .job = 7, .chunks = 9, .parallelism = 1, .seconds_per_chunk = 0.01, .idle_seconds_per_chunk = 0.1}}));
  // Twice as slow still ends sooner: 9 chunks (90 ms) against max(50, 4 x 20) = 80 ms.
  CHECK(pick_tail_holder(
      {{.worker = 1, .job = 7, .chunks = 9, .parallelism = 1, .seconds_per_chunk = 0.01, .idle_seconds_per_chunk = 0.02}}));
}

TEST_CASE("give back: the back half of the queued chunks, from the last run", "[give_back]") {
  // 26 held on one thread: 25 queued, 13 asked back, the last 13 of its last run.
  const auto r = back_half({{0, 10}, {100, 16}}, 26, 1);
  REQUIRE(r);
  CHECK(r->first == 103u);
  CHECK(r->count == 13u);
  // A short last run: all of it.
  const auto s = back_half({{0, 20}, {100, 3}}, 23, 1);
  REQUIRE(s);
  CHECK(s->first == 100u);
  CHECK(s->count == 3u);
  CHECK_FALSE(back_half({{0, 2}}, 2, 2));  // both computing
  CHECK_FALSE(back_half({}, 0, 1));
}

namespace {
struct PlainRun {
  uint64_t job, next, end;
};
}  // namespace

TEST_CASE("cut_runs takes a range out of a queue of runs, splitting runs it cuts into", "[give_back]") {
  std::deque<PlainRun> q{{1, 0, 10}, {2, 5, 8}, {1, 20, 30}, {1, 40, 50}};
  std::vector<ChunkRange> out;
  // Job 1's chunks 5..44: the back of its first run, all of the second, the front of the third.
  cut_runs(q, [](const PlainRun& r) { return r.job == 1; }, 5, 45, out);
  REQUIRE(out.size() == 3);
  CHECK((out[0].first == 5 && out[0].count == 5));
  CHECK((out[1].first == 20 && out[1].count == 10));
  CHECK((out[2].first == 40 && out[2].count == 5));
  REQUIRE(q.size() == 3);
  CHECK((q[0].job == 1 && q[0].next == 0 && q[0].end == 5));
  CHECK((q[1].job == 2 && q[1].next == 5 && q[1].end == 8));  // another job's run: untouched
  CHECK((q[2].job == 1 && q[2].next == 45 && q[2].end == 50));
  // The middle of a run: it becomes two, in order.
  out.clear();
  cut_runs(q, [](const PlainRun& r) { return r.job == 1; }, 2, 3, out);
  REQUIRE(out.size() == 1);
  CHECK((out[0].first == 2 && out[0].count == 1));
  REQUIRE(q.size() == 4);
  CHECK((q[0].next == 0 && q[0].end == 2 && q[1].next == 3 && q[1].end == 5));
  // Outside everything: nothing.
  out.clear();
  cut_runs(q, [](const PlainRun&) { return true; }, 100, 200, out);
  CHECK(out.empty());
  CHECK(q.size() == 4);
}
