// Dispatch: keep every worker's window of chunks in flight full. Workers announce their window in
// Hello (slots, widened for small chunks by windowElements: WorkerRecord::window_for); each time a
// worker returns results (or joins, or work arrives) it is topped up. Jobs take turns, each taking
// its share of the free window as runs of consecutive chunks, so concurrent jobs progress together
// and a TaskBatch is a few ranges however many chunks it carries. A top-up takes at most the
// worker's part of all the work queued (one budget over every job, shared by the workers: the
// policy is top_up.h's), so a small job, and the tail of a big one, spread over every worker
// instead of queueing in one wide window while others idle.
// The job spec goes to a worker once (DefineJob); after that only chunk ranges travel.
#include <capnp/message.h>
#include <fmt/format.h>

#include <algorithm>

#include "core/check.h"
#include "core/plural.h"
#include "net/wire_convert.h"
#include "scheduler/give_back.h"
#include "scheduler/scheduler.h"
#include "scheduler/top_up.h"

namespace psched {

std::chrono::microseconds Scheduler::report_interval() const {
  const auto fleet = kReportCostPerWorker * int64_t(workers_.size());
  return std::clamp(fleet, kReportInterval, kMaxReportInterval);
}

void Scheduler::dispatch() {
  // Each worker in turn shares what is left with the workers after it; once nothing is queued the
  // rest need not look. The turn starts at the worker the last dispatch gave work to (next fit), not
  // at the first: a storm of small jobs, each dispatched as it comes, otherwise walked past the same
  // full windows every time (18 plans a job, a tenth of psched's CPU for 100 clients x 100 jobs on
  // 1024 workers). A worker passed over gets its top-up from its own report (dispatch_to).
  std::vector<PlannedTopUp> planned;
  uint64_t left = workers_.size();
  const auto start = workers_.lower_bound(dispatch_from_);
  auto visit = [&](auto first, auto last) {
    for (auto it = first; it != last && !work_.empty(); ++it) {
      const size_t before = planned.size();
      plan_for(*it->second, left--, planned);
      if (planned.size() > before) dispatch_from_ = it->first;
    }
  };
  visit(start, workers_.end());
  visit(workers_.begin(), start);
  send_planned(planned);
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
  const std::vector<WorkerId> idle(idle_.begin(), idle_.end());
  for (const WorkerId id : idle)
    if (auto it = workers_.find(id); it != workers_.end()) dispatch_to(*it->second);
}

void Scheduler::note_idle(const WorkerRecord& worker) {
  if (worker.in_flight.size() == 0) {
    idle_.insert(worker.id);
  } else {
    idle_.erase(worker.id);
  }
}

void Scheduler::dispatch_to(WorkerRecord& worker, uint64_t sharing) {
  if (shutting_down_ || !worker.conn->is_open()) return;
  if (work_.empty()) {
    note_idle(worker);
    // A job's tail: an idle worker asks for part of the longest share; if no share could be judged
    // yet (no speed measured), it waits, and the next report from a busy worker asks again.
    if (worker.in_flight.size() == 0) {
      tail_idle_ = split_tail(worker) ? 0 : worker.id;
    } else if (tail_idle_ != 0) {
      auto it = workers_.find(tail_idle_);
      if (it == workers_.end() || it->second->in_flight.size() > 0 || split_tail(*it->second)) tail_idle_ = 0;
    }
    return;
  }
  std::vector<PlannedTopUp> planned;
  plan_for(worker, sharing, planned);
  send_planned(planned);
}

void Scheduler::plan_for(WorkerRecord& worker, uint64_t sharing, std::vector<PlannedTopUp>& planned) {
  if (shutting_down_ || !worker.conn->is_open()) return;
  TopUpContext context{report_interval(), sharing > 0 ? sharing : workers_.size(), &peers_,
                       sharing > 0 ? nullptr : &in_flight_elements_};
  context.retry = &peers_;
  if (worker.seconds_per_element <= 0 && worker.backend == "cuda")
    if (auto it = kind_seconds_per_element_.find(worker.device_name); it != kind_seconds_per_element_.end())
      context.kind_seconds_per_element = it->second;
  std::vector<JobTopUp> jobs = plan_top_up(worker, work_, context);
  if (!jobs.empty()) planned.push_back(PlannedTopUp{&worker, std::move(jobs)});
  note_idle(worker);
}

void Scheduler::send_planned(const std::vector<PlannedTopUp>& planned) {
  for (const PlannedTopUp& p : planned)
    for (const JobTopUp& top_up : p.jobs) send_top_up(*p.worker, top_up, work_.empty());
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

bool Scheduler::split_tail(WorkerRecord& idle) {
  if (idle.in_flight.size() > 0 || idle.isolating || idle.stalled || jobs_.empty() || !idle.conn->is_open()) return false;
  // A look over every worker's share costs O(workers x jobs): only for a few big jobs' tails (a
  // crowd of small jobs has nothing worth splitting: 100 clients x 100 jobs on 1024 simulated GPUs
  // took psched 6 s instead of 0.4 looking), and at most once a period, so that a fleet of
  // thousands going idle at a job's end does not cost psched a quadratic tail.
  if (jobs_.size() > kMaxJobsToSplit) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_split_look_) return false;
  next_split_look_ = now + std::max<std::chrono::microseconds>(kSplitTailPeriod,
                                                                kSplitTailCostPerWorker * int64_t(workers_.size()));
  // The holders of the jobs' running chunks (every job is running or done: nothing is queued).
  const double idle_per_element = idle.measured_seconds_per_element() / std::max(1.0, parallelism(idle));
  std::vector<TailHolder>& holders = tail_holders_;
  holders.clear();
  for (const auto& [id, w] : workers_) {
    if (w.get() == &idle || w->giving_back_to != 0 || w->isolating || w->stalled || w->in_flight.size() < 2 ||
        !w->conn->is_open())
      continue;
    const double per_element = w->measured_seconds_per_element();
    // An idle worker not measured yet is taken to be as fast as a holder of its kind only.
    if (idle_per_element == 0 && (w->backend != idle.backend || w->device_name != idle.device_name)) continue;
    for (const auto& [job_id, held] : w->in_flight.by_job()) {
      auto jit = jobs_.find(job_id);
      // A verify job's tail is its copies; giving back half a block would split its first copy.
      if (jit == jobs_.end() || jit->second->verify.on()) continue;
      const JobSpec& s = *jit->second->spec();
      const double elements = double(s.chunk_elements());
      // A chunk per unit of parallelism at a time: a CPU worker's threads, a GPU's one device.
      holders.push_back(TailHolder{id, job_id, held.chunks, uint32_t(std::max(1.0, parallelism(*w))),
                                   per_element * elements, idle_per_element * elements});
    }
  }
  const double interval = std::chrono::duration<double>(report_interval()).count();
  const std::optional<TailHolder> holder = pick_tail_holder(holders, std::max(kMinGiveBackGainSeconds, interval));
  if (!holder) return false;
  WorkerRecord& from = *must_find(workers_, holder->worker);
  const std::optional<ChunkRange> range =
      back_half(must_find(jobs_, holder->job)->running_ranges_of(from.id), holder->chunks, holder->parallelism);
  if (!range) return false;
  from.giving_back_to = idle.id;
  send_message(*from.conn, [&](wire::Message::Builder m) {
    auto g = m.initGiveBack();
    g.setJobId(holder->job);
    g.setFirst(range->first);
    g.setCount(std::min<uint64_t>(range->count, UINT32_MAX));
  });
  return true;
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
    tail_idle_ = to;
    return;
  }
  worker.in_flight.remove(job.id(), returned);
  counters_.tasks_given_back += returned;
  work_.update(job);
  // To the idle worker that asked, whole; to the others if it cannot take it all (or left).
  if (auto idle = workers_.find(to); idle != workers_.end()) dispatch_to(*idle->second, /*sharing=*/1);
  dispatch();
}

}  // namespace psched
