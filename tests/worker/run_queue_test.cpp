// A device's queue of runs (worker/run_queue.h), as the CUDA backend and psched-loadgen's simulated
// worker use it: runs pushed, joined where asked, taken from the head, dropped with their job and
// given back around a head that has started.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "worker/run_queue.h"

using namespace psched;

namespace {

struct Seen {
  uint64_t job_id, next, end;
  bool operator==(const Seen&) const = default;
};

template <typename Spec>
std::vector<Seen> runs_of(const RunQueue<Spec>& q) {
  std::vector<Seen> out;
  for (size_t i = 0; i < q.size(); ++i) out.push_back(Seen{q[i].job_id, q[i].next, q[i].end});
  return out;
}

}  // namespace

TEST_CASE("a run that continues the last one joins it only when asked and of the same job and spec", "[run_queue]") {
  RunQueue<int> joined;
  joined.push(1, 0, 10, 7, JoinRuns::kAdjacent);
  joined.push(1, 10, 5, 7, JoinRuns::kAdjacent);  // continues: joins
  joined.push(1, 15, 5, 8, JoinRuns::kAdjacent);  // another spec: its own run
  joined.push(2, 20, 5, 8, JoinRuns::kAdjacent);  // another job: its own run
  joined.push(2, 30, 5, 8, JoinRuns::kAdjacent);  // a gap: its own run
  joined.push(2, 35, 0, 8, JoinRuns::kAdjacent);  // nothing
  CHECK(runs_of(joined) == std::vector<Seen>{{1, 0, 15}, {1, 15, 20}, {2, 20, 25}, {2, 30, 35}});
  RunQueue<NoSpec> kept;
  kept.push(1, 0, 10, NoSpec{}, JoinRuns::kNo);
  kept.push(1, 10, 5, NoSpec{}, JoinRuns::kNo);
  CHECK(runs_of(kept) == std::vector<Seen>{{1, 0, 10}, {1, 10, 15}});
}

TEST_CASE("take hands out at most max chunks of the head run and pops it when it is done", "[run_queue]") {
  RunQueue<int> q;
  q.push(1, 0, 5, 7, JoinRuns::kNo);
  q.push(2, 100, 3, 9, JoinRuns::kNo);
  const QueuedRun<int> a = q.take(4, Turns::kInOrder);
  CHECK(Seen{a.job_id, a.next, a.end} == Seen{1, 0, 4});
  CHECK(a.spec == 7);
  const QueuedRun<int> b = q.take(4, Turns::kInOrder);  // only one left in the head
  CHECK(Seen{b.job_id, b.next, b.end} == Seen{1, 4, 5});
  CHECK(runs_of(q) == std::vector<Seen>{{2, 100, 103}});
}

TEST_CASE("with turns the next job goes after each take, in order it does not", "[run_queue]") {
  auto filled = [] {
    RunQueue<NoSpec> q;
    q.push(1, 0, 10, NoSpec{}, JoinRuns::kNo);
    q.push(2, 0, 10, NoSpec{}, JoinRuns::kNo);
    return q;
  };
  RunQueue<NoSpec> turns = filled(), in_order = filled();
  turns.take(2, Turns::kNextJob);
  in_order.take(2, Turns::kInOrder);
  CHECK(runs_of(turns) == std::vector<Seen>{{2, 0, 10}, {1, 2, 10}});
  CHECK(runs_of(in_order) == std::vector<Seen>{{1, 2, 10}, {2, 0, 10}});
}

TEST_CASE("dropping a job forgets its runs and counts their chunks", "[run_queue]") {
  RunQueue<NoSpec> q;
  q.push(1, 0, 10, NoSpec{}, JoinRuns::kNo);
  q.push(2, 0, 4, NoSpec{}, JoinRuns::kNo);
  q.push(1, 50, 6, NoSpec{}, JoinRuns::kNo);
  q.take(3, Turns::kInOrder);
  CHECK(q.drop_job(1) == 7 + 6);
  CHECK(runs_of(q) == std::vector<Seen>{{2, 0, 4}});
  CHECK(q.drop_job(3) == 0);
}

TEST_CASE("give back cuts the job's queued chunks in the range and keeps a started head chunk", "[run_queue]") {
  auto filled = [] {
    RunQueue<NoSpec> q;
    q.push(1, 0, 10, NoSpec{}, JoinRuns::kNo);
    q.push(2, 0, 10, NoSpec{}, JoinRuns::kNo);
    q.push(1, 20, 10, NoSpec{}, JoinRuns::kNo);
    return q;
  };
  RunQueue<NoSpec> not_started = filled();
  CHECK(not_started.give_back(1, 0, 25, HeadStarted::kNo) == std::vector<ChunkRange>{{0, 10}, {20, 5}});
  CHECK(runs_of(not_started) == std::vector<Seen>{{2, 0, 10}, {1, 25, 30}});
  RunQueue<NoSpec> started = filled();  // chunk 0 is on the device: it stays
  CHECK(started.give_back(1, 0, 25, HeadStarted::kYes) == std::vector<ChunkRange>{{1, 9}, {20, 5}});
  CHECK(runs_of(started) == std::vector<Seen>{{1, 0, 1}, {2, 0, 10}, {1, 25, 30}});
  RunQueue<NoSpec> empty;
  CHECK(empty.give_back(1, 0, 10, HeadStarted::kYes).empty());
}
