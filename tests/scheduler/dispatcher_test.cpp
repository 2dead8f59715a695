// Dispatcher (scheduler/dispatcher.h): the dispatch policy driven without sockets, over a table of
// workers and jobs: a round of the fleet, an idle worker's top-up, and a job's tail split by a
// GiveBack, planned and not sent.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/dispatcher.h"

using namespace psched;

namespace {

// No one else to take a verify copy or a retry: the dispatcher decides alone.
struct NoOneElse final : VerifyPeers, RetryPeers {
  bool someone_else(const std::vector<WorkerId>&) const override { return false; }
  bool connected(WorkerId) const override { return true; }
  bool someone_not_named(const std::vector<std::string>&) const override { return false; }
};

// A worker named "closed" has lost its connection.
bool open_unless_closed(const WorkerRecord& w) { return w.name != "closed"; }

// The Scheduler's tables, as the dispatcher borrows them.
struct Cluster {
  Dispatcher::Workers workers;
  JobTable jobs;
  NoOneElse peers;
  Dispatcher dispatcher{workers, jobs, peers, peers, open_unless_closed};
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  // The workers go first, as they leave the Scheduler before its Dispatcher: each window takes its
  // elements out of the dispatcher's count of the fleet's as it goes.
  ~Cluster() { workers.clear(); }

  // A worker of `slots` chunks' window for every job, at `seconds_per_element` (0: unmeasured), as
  // its reports so far measure it (WindowDepth::measured_seconds_per_element).
  WorkerRecord& join(WorkerId id, uint32_t slots, double seconds_per_element = 0, std::string name = "w") {
    auto w = std::make_unique<WorkerRecord>();
    w->id = id;
    w->name = std::move(name);
    w->slots = slots;
    w->window_elements = 0;  // slots only
    w->busy_seconds = seconds_per_element;
    w->elements_done = seconds_per_element > 0 ? 1 : 0;
    WorkerRecord& r = *w;
    dispatcher.worker_joined(r);
    workers[id] = std::move(w);
    return r;
  }
  // A job of `chunks` chunks of a million elements each.
  Job& submit(JobId id, uint64_t chunks) {
    JobSpec s;
    s.rows = 1;
    s.cols = chunks * 1000000;
    s.chunk_rows = 1;
    s.chunk_cols = 1000000;
    auto job = std::make_unique<Job>(id, 1, std::make_shared<const JobSpec>(normalized(s)), false);
    Job& j = *job;
    jobs[id] = std::move(job);
    dispatcher.job_changed(j);
    return j;
  }
};

}  // namespace

TEST_CASE("a round of the fleet gives each worker its part of a job, planned in worker order", "[dispatcher]") {
  Cluster c;
  c.join(1, 8);
  c.join(2, 8);
  Job& job = c.submit(1, 8);
  const std::vector<Dispatcher::TopUp> plan = c.dispatcher.plan_round();
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].worker->id == 1);
  REQUIRE(plan[0].jobs.size() == 1);
  CHECK(plan[0].jobs[0].ranges == std::vector<ChunkRange>{{0, 4}});
  CHECK(plan[1].worker->id == 2);
  REQUIRE(plan[1].jobs.size() == 1);
  CHECK(plan[1].jobs[0].ranges == std::vector<ChunkRange>{{4, 4}});
  CHECK(job.queued() == 0);
  CHECK_FALSE(c.dispatcher.has_work());
  CHECK(c.dispatcher.idle().empty());
}

TEST_CASE("a worker left with nothing is idle, and work that arrives goes to it whole", "[dispatcher]") {
  Cluster c;
  WorkerRecord& w = c.join(1, 8);
  const Dispatcher::Plan nothing = c.dispatcher.plan_for(w, 0, c.now);
  CHECK(nothing.top_ups.empty());
  CHECK_FALSE(nothing.give_back);
  CHECK(c.dispatcher.idle() == std::vector<WorkerId>{1});
  c.submit(1, 5);
  const Dispatcher::Plan plan = c.dispatcher.plan_for(w, 0, c.now);
  REQUIRE(plan.top_ups.size() == 1);
  CHECK(plan.top_ups[0].jobs[0].ranges == std::vector<ChunkRange>{{0, 5}});
  CHECK(w.in_flight.size() == 5);
  CHECK(c.dispatcher.idle().empty());
}

TEST_CASE("a worker whose connection closed is planned nothing, and the others share the job", "[dispatcher]") {
  Cluster c;
  c.join(1, 8, 0, "closed");
  c.join(2, 8);
  c.submit(1, 6);
  const std::vector<Dispatcher::TopUp> plan = c.dispatcher.plan_round();
  REQUIRE(plan.size() == 1);
  CHECK(plan[0].worker->id == 2);
  CHECK(plan[0].jobs[0].ranges == std::vector<ChunkRange>{{0, 6}});
}

TEST_CASE("at a job's tail an idle worker gets the back half of the longest share by a GiveBack", "[dispatcher]") {
  Cluster c;
  WorkerRecord& holder = c.join(1, 100, 1e-9);  // a millisecond a chunk
  c.submit(1, 100);
  REQUIRE(c.dispatcher.plan_round().size() == 1);
  CHECK(holder.in_flight.size() == 100);
  WorkerRecord& idle = c.join(2, 100, 1e-9);
  const Dispatcher::Plan plan = c.dispatcher.plan_for(idle, 0, c.now);
  CHECK(plan.top_ups.empty());
  REQUIRE(plan.give_back);
  CHECK(plan.give_back->from == &holder);
  CHECK(plan.give_back->job == 1);
  // 99 chunks queued behind the one running: half of them, rounded up, from the end.
  CHECK(plan.give_back->range == ChunkRange{50, 50});
  CHECK(holder.giving_back_to == 2);
}

TEST_CASE("a GiveBack that brought nothing back is asked again for the idle worker at a holder's next report",
          "[dispatcher]") {
  Cluster c;
  WorkerRecord& holder = c.join(1, 100, 1e-9);
  c.submit(1, 100);
  c.dispatcher.plan_round();
  WorkerRecord& idle = c.join(2, 100, 1e-9);
  REQUIRE(c.dispatcher.plan_for(idle, 0, c.now).give_back);
  // Every chunk asked for had started: the answer returned none.
  holder.giving_back_to = 0;
  c.dispatcher.tail_waits(idle.id);
  // Within the period no look is made; after it, the holder's report asks again for the idle worker.
  CHECK_FALSE(c.dispatcher.plan_for(holder, 0, c.now).give_back);
  const Dispatcher::Plan again = c.dispatcher.plan_for(holder, 0, c.now + kMaxReportInterval);
  REQUIRE(again.give_back);
  CHECK(again.give_back->from == &holder);
  CHECK(holder.giving_back_to == 2);
}

TEST_CASE("a worker running a job alone is not asked to give any back while no one is measured",
          "[dispatcher]") {
  Cluster c;
  WorkerRecord& holder = c.join(1, 100);  // no speed measured: no share can be judged
  c.submit(1, 100);
  c.dispatcher.plan_round();
  WorkerRecord& idle = c.join(2, 100);
  CHECK_FALSE(c.dispatcher.plan_for(idle, 0, c.now).give_back);
  CHECK(holder.giving_back_to == 0);
}

TEST_CASE("a GPU's window deepens by the pace the dispatcher measured of it, and before, of its kind",
          "[dispatcher]") {
  Cluster c;
  WorkerRecord& measured = c.join(1, 4);
  WorkerRecord& same_kind = c.join(2, 4);
  WorkerRecord& other_kind = c.join(3, 4);
  for (WorkerRecord* w : {&measured, &same_kind, &other_kind}) w->backend = "cuda";
  measured.device_name = same_kind.device_name = "H100";
  other_kind.device_name = "A100";
  c.submit(1, 1000);                               // a million elements a chunk
  c.dispatcher.reported(measured, 1e-3, 1, 1000000);  // 1 ns an element: 1 ms a chunk
  const std::vector<Dispatcher::TopUp> plan = c.dispatcher.plan_round();
  REQUIRE(plan.size() == 3);
  // Each share is far more than four slots: four report intervals (5 ms) of 1 ms chunks for the
  // measured GPU and the unmeasured one of its kind, four plain windows for a kind none measured.
  CHECK(measured.in_flight.size() == 20);
  CHECK(same_kind.in_flight.size() == 20);
  CHECK(other_kind.in_flight.size() == 16);
  // A worker that left is forgotten; its kind's pace stays for the others.
  c.dispatcher.worker_left(1);
  CHECK(c.dispatcher.measured_seconds_per_element(measured) == 0);
  CHECK(c.dispatcher.kind_seconds_per_element("H100") == 1e-9);
}
