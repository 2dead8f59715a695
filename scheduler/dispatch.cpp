// Dispatch: keep every worker's window of chunks in flight full. Workers announce their window in
// Hello (slots, widened for small chunks by windowElements: window_for, window_depth.h); each time a
// worker returns results (or joins, or work arrives) it is topped up. Jobs take turns, each taking
// its share of the free window as runs of consecutive chunks, so concurrent jobs progress together
// and a TaskBatch is a few ranges however many chunks it carries. A top-up takes at most the
// worker's part of all the work queued (one budget over every job, shared by the workers: the
// policy is top_up.h's), so a small job, and the tail of a big one, spread over every worker
// instead of queueing in one wide window while others idle. The Dispatcher (dispatcher.h) decides
// all of this and returns plans; here they are sent.
// The job spec goes to a worker once (DefineJob); after that only chunk ranges travel.
#include <capnp/message.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/plural.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

void Scheduler::dispatch() {
  if (shutting_down_) return;
  send_planned(dispatcher_.plan_round());
}

void Scheduler::dispatch_soon() {
  if (dispatch_posted_) return;
  dispatch_posted_ = true;
  boost::asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
    if (alive.expired()) return;
    dispatch_posted_ = false;
    dispatch();
  });
}

void Scheduler::wake_idle() {
  for (const WorkerId id : dispatcher_.idle())
    if (auto it = workers_.find(id); it != workers_.end()) dispatch_to(*it->second);
}

void Scheduler::dispatch_to(WorkerRecord& worker, uint64_t sharing) {
  if (shutting_down_) return;
  const Dispatcher::Plan plan = dispatcher_.plan_for(worker, sharing, std::chrono::steady_clock::now());
  send_planned(plan.top_ups);
  if (plan.give_back) send_give_back(*plan.give_back);
}

void Scheduler::send_planned(const std::vector<Dispatcher::TopUp>& planned) {
  for (const Dispatcher::TopUp& p : planned)
    for (const JobTopUp& top_up : p.jobs) send_top_up(*p.worker, top_up, !dispatcher_.has_work());
}

// What plan_top_up took for one job goes out: its spec first if the worker has not had it, then the
// ranges in one TaskBatch.
void Scheduler::send_top_up(WorkerRecord& worker, const JobTopUp& top_up, bool queue_empty) {
  const Job& job = *top_up.job;
  counters_.tasks_dispatched += top_up.chunks();
  send_owed_drops(worker);
  if (worker.defined_jobs.insert(job.id()).second) {
    defined_on_[job.id()].push_back(worker.id);
    send_message(*worker.conn, [&](wire::Message::Builder m) {
      auto d = m.initDefineJob();
      d.setJobId(job.id());
      to_wire(*job.spec(), d.initSpec());
      d.setPartialBlock(job.partial_block());
    });
  }
  OutgoingMessage m(64 + top_up.ranges.size() * 4);
  auto batch = m.initRoot<wire::Message>().initTaskBatch();
  batch.setJobId(job.id());
  batch.setReportIntervalUs(uint32_t(report_interval().count()));
  batch.setQueueEmpty(queue_empty);
  auto list = batch.initRanges(uint32_t(top_up.ranges.size()));
  for (size_t i = 0; i < top_up.ranges.size(); ++i) {
    list[uint32_t(i)].setFirst(top_up.ranges[i].first);
    list[uint32_t(i)].setCount(uint32_t(top_up.ranges[i].count));
  }
  worker.conn->send(m);
}

void Scheduler::send_give_back(const Dispatcher::GiveBack& give_back) {
  send_message(*give_back.from->conn, [&](wire::Message::Builder m) {
    auto g = m.initGiveBack();
    g.setJobId(give_back.job);
    g.setFirst(give_back.range.first);
    g.setCount(std::min<uint64_t>(give_back.range.count, UINT32_MAX));
  });
}

// The answer to a GiveBack: the chunks the worker had not started go back to the queue, for the
// idle workers. They must be running there: the worker never reports a chunk it gave back.
void Scheduler::on_given_back(WorkerRecord& worker, wire::ResultBatch::Reader batch) {
  const WorkerId to = worker.giving_back_to;
  worker.giving_back_to = 0;
  auto it = jobs_.find(batch.getJobId());
  if (it == jobs_.end()) return;  // done or gone meanwhile: its chunks left the window with it
  Job& job = *it->second;
  for (auto r : batch.getReturned()) {
    const ChunkRange range{r.getFirst(), r.getCount()};
    const bool inside = range.count > 0 && range.first < job.chunks() && range.count <= job.chunks() - range.first;
    if (inside && worker.stalled_once && !job.ranges().running_here(range, worker.id)) continue;  // re-queued
    if (!inside || !job.ranges().running_here(range, worker.id)) {
      protocol_error(worker, fmt::format("gave back {} from chunk {} of job {}, which it does not hold",
                                               counted(range.count, "chunk"), range.first, job.id()));
      return;
    }
  }
  uint64_t returned = 0;
  for (auto r : batch.getReturned()) {
    const ChunkRange range{r.getFirst(), r.getCount()};
    if (job.ranges().running_here(range, worker.id) && job.give_back(range, worker.id)) returned += range.count;
  }
  if (returned == 0) {  // all started: the idle worker waits for the next report
    dispatcher_.tail_waits(to);
    return;
  }
  worker.in_flight.remove(job.id(), returned);
  counters_.tasks_given_back += returned;
  dispatcher_.job_changed(job);
  // To the idle worker that asked, whole; to the others if it cannot take it all (or left).
  if (auto idle = workers_.find(to); idle != workers_.end()) dispatch_to(*idle->second, /*sharing=*/1);
  dispatch();
}

}  // namespace psched
