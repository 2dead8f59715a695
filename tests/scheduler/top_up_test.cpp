// plan_top_up (scheduler/top_up.h): what a worker's window gets from the jobs with work, planned
// without sockets: ranges per job, turns between jobs, each job's part, suspects alone, verify
// copies first, and the queue of jobs with work kept as the jobs change.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/top_up.h"

using namespace psched;

namespace Catch {
template <>
struct StringMaker<ChunkRange> {
  static std::string convert(const ChunkRange& r) {
    return "{" + std::to_string(r.first) + ", " + std::to_string(r.count) + "}";
  }
};
}  // namespace Catch

namespace {

// A job of `chunks` chunks of `chunk_elements` elements each (one row of chunks).
std::unique_ptr<Job> job_of(JobId id, uint64_t chunks, uint64_t chunk_elements = 1000000, double verify = 0) {
  JobSpec s;
  s.rows = 1;
  s.cols = chunks * chunk_elements;
  s.chunk_rows = 1;
  s.chunk_cols = chunk_elements;
  auto job = std::make_unique<Job>(id, 1, std::make_shared<const JobSpec>(normalized(s)), false);
  if (verify > 0) job->verify = BlockVerifier(verify, s.seed, chunks, verify_block_chunks(chunks, chunk_elements));
  return job;
}

WorkerRecord worker_with_slots(WorkerId id, uint32_t slots) {
  WorkerRecord w;
  w.id = id;
  w.slots = slots;
  w.window_elements = 0;  // slots only: the window is `slots` chunks for every job
  return w;
}

struct Table {
  JobTable jobs;
  WorkQueue queue;
  Job& add(std::unique_ptr<Job> job) {
    Job& j = *job;
    queue.update(j);
    jobs[j.id()] = std::move(job);
    return j;
  }
};

// Verify's view of the workers: one alone, or two (one outside any one excluded).
struct Peers final : VerifyPeers {
  size_t workers;
  explicit Peers(size_t n) : workers(n) {}
  bool someone_else(const std::vector<WorkerId>& excluded) const override { return excluded.size() < workers; }
  bool connected(WorkerId) const override { return true; }
};
const Peers kAlone(0), kTwo(2);

TopUpContext alone(uint64_t sharing = 1) {
  TopUpContext c;
  c.sharing = sharing;
  c.peers = &kAlone;
  return c;
}

}  // namespace

TEST_CASE("a top-up takes one run of consecutive chunks for a lone job, as many as the window holds", "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 10));
  WorkerRecord w = worker_with_slots(7, 4);
  const auto plan = plan_top_up(w, t.queue, alone());
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].job == &job);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{0, 4}});
  CHECK(w.in_flight.size() == 4);
  CHECK(job.queued() == 6);
  CHECK(job.ranges().running_here(ChunkRange{0, 4}, 7));
  // Full: a second top-up takes nothing.
  CHECK(plan_top_up(w, t.queue, alone()).empty());
}

TEST_CASE("jobs take turns in the window, and the next top-up starts after the last job served", "[top_up]") {
  Table t;
  t.add(job_of(1, 100));
  t.add(job_of(2, 100));
  WorkerRecord w = worker_with_slots(7, 4);
  // Each turn a job takes its share of what is still free (free / jobs): 2, then 1 each.
  const auto plan = plan_top_up(w, t.queue, alone());
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].job->id() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{0, 3}});
  CHECK(plan[1].job->id() == 2);
  CHECK(plan[1].ranges == std::vector<ChunkRange>{{0, 1}});
  CHECK(t.queue.served_last() == 1);
  // Job 1 was served last: room for one chunk goes to job 2.
  w.in_flight.remove(1, 1);
  const auto next = plan_top_up(w, t.queue, alone());
  REQUIRE(next.size() == 1);
  CHECK(next[0].job->id() == 2);
  CHECK(next[0].ranges == std::vector<ChunkRange>{{1, 1}});
}

TEST_CASE("a worker takes at most its part of what a job has left when workers share it", "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 12));
  WorkerRecord w = worker_with_slots(7, 64);
  const auto plan = plan_top_up(w, t.queue, alone(/*sharing=*/4));
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{0, 3}});  // 12 chunks over 4 workers
  CHECK(job.queued() == 9);
}

TEST_CASE("a job left with no work leaves the queue, and a job given work back joins it", "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 3));
  WorkerRecord w = worker_with_slots(7, 8);
  plan_top_up(w, t.queue, alone());
  CHECK(job.queued() == 0);
  CHECK_FALSE(t.queue.contains(1));
  job.requeue(ChunkRange{1, 1}, 7, "w7", /*blame=*/false);
  w.in_flight.remove(1, 1);
  t.queue.update(job);
  CHECK(t.queue.contains(1));
  const auto plan = plan_top_up(w, t.queue, alone());
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{1, 1}});
}

TEST_CASE("a suspect goes alone to an idle worker, which then takes nothing until it is back", "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 10));
  WorkerRecord first = worker_with_slots(7, 4);
  plan_top_up(first, t.queue, alone());
  // Worker 7 died twice with chunks 0..3: they come back as a suspect range.
  job.requeue(ChunkRange{0, 4}, 7, "w7", /*blame=*/true);
  uint64_t taken_from = 0;
  REQUIRE(job.take_run(8, 4, taken_from) == 4);
  job.requeue(ChunkRange{0, 4}, 8, "w8", /*blame=*/true, /*repeat_as_suspect=*/true);
  REQUIRE(job.has_suspects());
  t.queue.update(job);
  WorkerRecord idle = worker_with_slots(9, 4);
  const auto plan = plan_top_up(idle, t.queue, alone());
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{0, 1}});  // one chunk, alone
  CHECK(idle.isolating);
  CHECK(plan_top_up(idle, t.queue, alone()).empty());
  // Back with chunk 0: the next suspect chunk goes to it alone again.
  REQUIRE(job.finish(0, 9, PartialSum{1, 1, 1, 1}));
  idle.in_flight.remove(1, 1);
  const auto next = plan_top_up(idle, t.queue, alone());
  REQUIRE(next.size() == 1);
  CHECK(next[0].ranges == std::vector<ChunkRange>{{1, 1}});
  CHECK(idle.isolating);
}

TEST_CASE("verify copies go out before fresh chunks, and not to the worker of the first copy", "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 10, 1000000, /*verify=*/1.0));
  WorkerRecord a = worker_with_slots(1, 2), b = worker_with_slots(2, 2);
  TopUpContext two = alone(2);
  two.peers = &kTwo;
  two.sharing = 1;
  REQUIRE(plan_top_up(a, t.queue, two).front().ranges == std::vector<ChunkRange>{{0, 2}});
  // Chunk 0's first copy is in from worker 1: held, its copy queued.
  REQUIRE(job.verify.block_chunks() == 1);
  REQUIRE(job.hold_for_verify({0, 1}, 1));
  job.verify.first_piece({0, 1}, VerifyCopy{1, "w1", "cpu", PartialSum{1, 1, 1, 1}, false});
  a.in_flight.remove(1, 1);
  t.queue.update(job);
  const auto to_a = plan_top_up(a, t.queue, two);
  REQUIRE(to_a.size() == 1);
  CHECK(to_a[0].ranges == std::vector<ChunkRange>{{2, 1}});  // not its own copy
  const auto to_b = plan_top_up(b, t.queue, two);
  REQUIRE(to_b.size() == 1);
  CHECK(to_b[0].ranges.front() == ChunkRange{0, 1});  // the copy first
  CHECK(job.verify.running_here({0, 1}, 2));
}

TEST_CASE("the queue counts the elements of every job's queued chunks as jobs take and give back work",
          "[top_up]") {
  Table t;
  Job& a = t.add(job_of(1, 10, 1000));
  t.add(job_of(2, 4, 500));
  CHECK(t.queue.queued_elements() == 10 * 1000 + 4 * 500);
  uint64_t first = 0;
  REQUIRE(a.take_run(7, 6, first) == 6);
  t.queue.update(a);
  CHECK(t.queue.queued_elements() == 4 * 1000 + 4 * 500);
  REQUIRE(a.take_run(7, 4, first) == 4);
  t.queue.update(a);
  CHECK_FALSE(t.queue.contains(1));
  CHECK(t.queue.queued_elements() == 4 * 500);
  a.requeue(ChunkRange{2, 3}, 7, "w7", /*blame=*/false);
  t.queue.update(a);
  CHECK(t.queue.queued_elements() == 3 * 1000 + 4 * 500);
  t.queue.forget(2);
  t.queue.forget(2);  // twice: nothing more to take away
  CHECK(t.queue.queued_elements() == 3 * 1000);
}

namespace {

// A GPU; its pace is what the Dispatcher measured of it, which a top-up is handed (TopUpContext::pace).
WorkerRecord gpu(WorkerId id, uint32_t slots) {
  WorkerRecord w = worker_with_slots(id, slots);
  w.backend = "cuda";
  return w;
}
// A top-up of a GPU measured at 1 us per element, so a chunk of 1000 elements takes 1 ms.
TopUpContext measured(TopUpContext c) {
  static const WorkerPace pace = [] {
    WorkerPace p;
    p.observe_speed(gpu(0, 1), 1e-3, 1000);
    return p;
  }();
  c.pace = &pace;
  return c;
}

TopUpContext fleet_of(uint64_t workers, std::chrono::microseconds interval) {
  TopUpContext c = alone(workers);
  c.report_interval = interval;
  return c;
}

}  // namespace

TEST_CASE("many jobs on a measured GPU: each turn is at least a report interval of one job's work, and the "
          "top-up at most the worker's part of all the work queued",
          "[top_up]") {
  Table t;
  for (JobId id = 1; id <= 20; ++id) t.add(job_of(id, 100, 1000));  // 2000 chunks of 1 ms
  WorkerRecord w = gpu(7, 4);
  // 10 workers: this one's part of the queue is 200 ms; its window four intervals of 10 ms.
  const auto plan = plan_top_up(w, t.queue, measured(fleet_of(10, std::chrono::milliseconds(10))));
  REQUIRE(plan.size() == 4);
  for (const JobTopUp& p : plan) CHECK(p.ranges == std::vector<ChunkRange>{{0, 10}});  // a turn: 10 ms
  CHECK(w.in_flight.size() == 40);
  // Unmeasured, in a fleet whose report interval is the floor, the same worker takes four plain
  // windows: 16 chunks, a chunk of each of 16 jobs.
  Table u;
  for (JobId id = 1; id <= 20; ++id) u.add(job_of(id, 100, 1000));
  WorkerRecord fresh = worker_with_slots(8, 4);
  fresh.backend = "cuda";
  const auto plain = plan_top_up(fresh, u.queue, fleet_of(10, kReportInterval));
  REQUIRE(plain.size() == 16);
  for (const JobTopUp& p : plain) CHECK(p.chunks() == 1);
}

TEST_CASE("a top-up takes at most the worker's part of all the work queued, whatever its window holds",
          "[top_up]") {
  Table t;
  for (JobId id = 1; id <= 100; ++id) t.add(job_of(id, 10, 1000));  // 1000 chunks of 1 ms
  WorkerRecord w = gpu(7, 4);
  // Its window is four intervals of 100 ms (400 chunks); its part of the queue over 10 workers,
  // 100 chunks: ten whole jobs.
  const auto plan = plan_top_up(w, t.queue, measured(fleet_of(10, std::chrono::milliseconds(100))));
  uint64_t taken = 0;
  for (const JobTopUp& p : plan) {
    CHECK(p.ranges == std::vector<ChunkRange>{{0, 10}});
    taken += p.chunks();
  }
  CHECK(taken == 100);
  CHECK(t.queue.queued_elements() == 900 * 1000);
}

TEST_CASE("over the whole fleet, a top-up brings the window up to an equal part of all the work queued and held",
          "[top_up]") {
  Table t;
  Job& job = t.add(job_of(1, 100, 1000));
  uint64_t fleet = 0;  // the elements in every window (Dispatcher::in_flight_elements_)
  WorkerRecord a = worker_with_slots(1, 64), b = worker_with_slots(2, 64);
  a.in_flight.count_into(&fleet);
  b.in_flight.count_into(&fleet);
  TopUpContext c = alone(2);
  c.fleet_in_flight_elements = &fleet;
  plan_top_up(a, t.queue, c);  // nothing is held: half of the 100 queued
  CHECK(a.in_flight.size() == 50);
  CHECK(fleet == 50 * 1000);
  // a reports 40 done before b asks: 50 queued, 10 held, so the level is 30 and a takes 20 (of
  // the queue alone it would take 25, and b then 13: a would hold 35 and b 13).
  a.in_flight.remove(1, 40);
  CHECK(fleet == 10 * 1000);
  plan_top_up(a, t.queue, c);
  CHECK(a.in_flight.size() == 30);
  plan_top_up(b, t.queue, c);
  CHECK(b.in_flight.size() == 30);
  CHECK(job.queued() == 0);
  CHECK(fleet == 60 * 1000);
  {  // a worker that leaves takes its window's elements out of the count
    WorkerRecord gone = worker_with_slots(3, 64);
    gone.in_flight.count_into(&fleet);
    gone.in_flight.add(1, 5, 1, 1000);
    CHECK(fleet == 65 * 1000);
  }
  CHECK(fleet == 60 * 1000);
}

namespace {

// The retry rule's view of the workers: whether one named none of the given names is connected.
struct Others final : RetryPeers {
  std::vector<std::string> connected;
  bool someone_not_named(const std::vector<std::string>& names) const override {
    for (const std::string& n : connected)
      if (std::find(names.begin(), names.end(), n) == names.end()) return true;
    return false;
  }
};

// Worker 7 ("w7", 4 slots) took chunks 0..3 of job 1 and failed chunk `failed`; w7 and w8 are connected.
struct FailedOnW7 {
  Table t;
  Job& job;
  WorkerRecord w7 = worker_with_slots(7, 4);
  Others others;
  TopUpContext context = alone();
  FailedOnW7(uint64_t chunks, uint64_t failed) : job(t.add(job_of(1, chunks))) {
    w7.name = "w7";
    others.connected = {"w7", "w8"};
    context.retry = &others;
    plan_top_up(w7, t.queue, context);
    REQUIRE(job.requeue(failed, 7, "w7", /*blame=*/true) == 1);
    w7.in_flight.remove(1, 1);
    t.queue.update(job);
  }
};

}  // namespace

TEST_CASE("a chunk that failed on a worker is retried by another while one is connected", "[top_up]") {
  FailedOnW7 f(10, 1);
  auto& [t, job, w7, others, context] = f;
  // Chunk 1 failed there (a file its node cannot read): w7 takes fresh chunks, not chunk 1.
  auto plan = plan_top_up(w7, t.queue, context);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{4, 1}});
  CHECK(job.state(1) == ChunkState::kQueued);
  // w8 never failed it: it takes the retry first.
  WorkerRecord w8 = worker_with_slots(8, 2);
  w8.name = "w8";
  plan = plan_top_up(w8, t.queue, context);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].ranges == std::vector<ChunkRange>{{1, 1}, {5, 1}});
  // With no one else connected, the chunk that failed on w7 runs on w7 again.
  REQUIRE(job.requeue(1, 8, "w8", /*blame=*/true) == 2);
  w8.in_flight.remove(1, 1);
  w7.in_flight.remove(1, 1);
  t.queue.update(job);
  others.connected = {"w7", "w8", "w9"};  // w9 failed nothing: w7 leaves chunk 1 to it
  CHECK(plan_top_up(w7, t.queue, context).at(0).ranges == std::vector<ChunkRange>{{6, 1}});
  w7.in_flight.remove(1, 1);
  others.connected = {"w7"};
  CHECK(plan_top_up(w7, t.queue, context).at(0).ranges == std::vector<ChunkRange>{{1, 1}});
}

TEST_CASE("a worker does not take a retry it failed when nothing fresh is left", "[top_up]") {
  FailedOnW7 f(2, 0);
  CHECK(plan_top_up(f.w7, f.t.queue, f.context).empty());
  CHECK(f.t.queue.contains(1));  // still waiting, for w8
}

TEST_CASE("where jobs compete, a job that fits in a share of the window is taken whole past a full window, not "
          "in crumbs of the room huge jobs leave, and a bigger one waits for room",
          "[top_up]") {
  Table t;
  WorkerRecord w = gpu(1, 4);  // 1 ms a chunk of 1000 elements: a window of 20 (4 intervals)
  for (JobId id : {1, 2, 3}) t.add(job_of(id, 1000000, 1000));
  const TopUpContext context = measured(alone());
  plan_top_up(w, t.queue, context);
  const uint64_t held = w.in_flight.size();
  REQUIRE(held == 20);  // no room left
  // Four jobs queued: a share is 5 chunks. A job of 4 goes at once, whole.
  t.add(job_of(4, 4, 1000));
  auto plan = plan_top_up(w, t.queue, context);
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].job->id() == 4);
  CHECK(plan[0].chunks() == 4);
  CHECK(w.in_flight.size() == held + 4);
  // Five jobs queued, a share of 4: a job of 10 waits for room, as every job did before.
  t.add(job_of(5, 10, 1000));
  CHECK(plan_top_up(w, t.queue, context).empty());
}
