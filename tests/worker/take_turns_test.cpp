// Jobs take turns on a device's queue of runs (worker/run_queue.h next_job_takes_its_turn, as the
// CUDA dispatcher calls it after each launch): a small job queued behind another's long runs gets
// the next launch but one, and a queue of one job is left as it is.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "worker/run_queue.h"

using psched::next_job_takes_its_turn;

namespace {

struct QueuedRun {
  uint64_t job_id, next, end;
};

std::vector<uint64_t> jobs_of(const std::deque<QueuedRun>& q) {
  std::vector<uint64_t> out;
  for (const QueuedRun& r : q) out.push_back(r.job_id);
  return out;
}

// The order in which a dispatcher that takes `per_launch` chunks a launch (as batch_chunks does)
// launches the queue's chunks: the job of each launch.
std::vector<uint64_t> launches(std::deque<QueuedRun> q, uint64_t per_launch) {
  std::vector<uint64_t> out;
  while (!q.empty()) {
    QueuedRun& front = q.front();
    const uint64_t job = front.job_id;
    front.next += std::min(per_launch, front.end - front.next);
    out.push_back(job);
    if (front.next == front.end) q.pop_front();
    next_job_takes_its_turn(q, job);
  }
  return out;
}

}  // namespace

TEST_CASE("the runs of the job just launched go behind the next job's", "[take_turns]") {
  std::deque<QueuedRun> q{{1, 10, 1000}, {1, 2000, 3000}, {2, 0, 5}, {1, 5000, 6000}};
  next_job_takes_its_turn(q, uint64_t{1});
  CHECK(jobs_of(q) == std::vector<uint64_t>{2, 1, 1, 1});
  CHECK(q[1].next == 5000);  // job 1's run behind job 2's stays where it was
  CHECK(q[2].next == 10);    // a moved run keeps its `next`: the chunks before it are launched
  CHECK(q[3].next == 2000);
}

TEST_CASE("one job queued, or another job at the front: nothing moves", "[take_turns]") {
  std::deque<QueuedRun> one{{1, 0, 10}, {1, 20, 30}};
  next_job_takes_its_turn(one, uint64_t{1});
  CHECK(jobs_of(one) == std::vector<uint64_t>{1, 1});
  std::deque<QueuedRun> other{{2, 0, 10}, {1, 20, 30}};
  next_job_takes_its_turn(other, uint64_t{1});  // job 1's last run ended: job 2 is next already
  CHECK(jobs_of(other) == std::vector<uint64_t>{2, 1});
  std::deque<QueuedRun> empty;
  next_job_takes_its_turn(empty, uint64_t{1});
  CHECK(empty.empty());
}

TEST_CASE("small jobs behind a million chunks of another are launched next, the jobs in turn", "[take_turns]") {
  // Job 1's million chunks in two runs, then job 2's 3 launches' worth and job 3's one.
  const std::deque<QueuedRun> q{{1, 0, 500000}, {1, 500000, 1000000}, {2, 0, 300}, {3, 0, 50}};
  const std::vector<uint64_t> order = launches(q, 100);
  REQUIRE(order.size() == 10000 + 3 + 1);
  CHECK(std::vector<uint64_t>(order.begin(), order.begin() + 7) == std::vector<uint64_t>{1, 2, 3, 1, 2, 1, 2});
  CHECK(std::count(order.begin() + 7, order.end(), uint64_t{1}) == long(order.size() - 7));  // then job 1 alone
}
