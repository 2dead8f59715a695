// Dispatch: keep every worker's window of chunks in flight full. Workers announce their window in
// Hello (slots, widened for small chunks by windowElements: WorkerRecord::window_for); each time a
// worker returns results (or joins, or work arrives) it is topped up. Jobs take turns, each taking
// its share of the free window as runs of consecutive chunks, so concurrent jobs progress together
// and a TaskBatch is a few ranges however many chunks it carries. A top-up takes at most a
// worker's part of what a job has left (queued chunks / workers), so a small job, and the tail of
// a big one, spread over every worker instead of queueing in one wide window while others idle.
// The job spec goes to a worker once (DefineJob); after that only chunk ranges travel.
#include <capnp/message.h>
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "common/wire_convert.h"
#include "scheduler/give_back.h"
#include "scheduler/scheduler.h"

namespace psched {

namespace {

// Chunks of `job` below which a top-up is not cut into parts: one slot's share of the worker's
// element window (a CPU thread's quarter million elements, a GPU batch). Splitting less than that
// over several workers costs each of them a round trip and gains nothing (a 10-chunk job of 1000
// elements took 48 us on one worker and 64 us split over two).
uint64_t least_worth_splitting(const WorkerRecord& worker, const Job& job) {
  const JobSpec& s = *job.spec();
  const uint64_t chunk_elements = std::max<uint64_t>(1, s.chunk_rows * s.chunk_cols);
  const uint64_t slot_elements = worker.window_elements / std::max<uint64_t>(1, worker.slots);
  return std::max<uint64_t>(1, (slot_elements + chunk_elements - 1) / chunk_elements);
}

}  // namespace

std::chrono::microseconds Scheduler::report_interval() const {
  const auto fleet = kReportCostPerWorker * int64_t(workers_.size());
  return std::clamp(fleet, kReportInterval, kMaxReportInterval);
}

void Scheduler::dispatch() {
  // Each worker in turn shares what is left with the workers after it; once nothing is queued the
  // rest need not look.
  uint64_t left = workers_.size();
  for (auto& [id, w] : workers_) {
    if (queued_jobs_.empty()) return;
    dispatch_to(*w, left--);
  }
}

void Scheduler::dispatch_to(WorkerRecord& worker, uint64_t sharing) {
  if (shutting_down_ || !worker.conn->is_open()) return;
  if (queued_jobs_.empty()) {
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
  if (worker.isolating && worker.in_flight.size() > 0) return;  // a suspect runs alone
  worker.isolating = false;

  // Ranges picked per job, in the order taken (consecutive runs of one job merged), and how many
  // more chunks of the job this top-up may take: the worker's part of what the job had left.
  struct Picked {
    Job* job;
    uint64_t part_left;
    std::vector<std::pair<uint64_t, uint32_t>> ranges;
  };
  std::vector<Picked> picked;
  std::unordered_map<JobId, size_t> picked_index;  // a GPU window holds hundreds of small jobs
  const uint64_t workers = std::max<uint64_t>(1, sharing > 0 ? sharing : workers_.size());
  auto picked_of = [&](Job* job) -> Picked& {
    auto [it, fresh] = picked_index.try_emplace(job->id(), picked.size());
    if (!fresh) return picked[it->second];
    const uint64_t part = (job->queued() + job->verify.queued() + workers - 1) / workers;
    picked.push_back(Picked{job, std::max(part, least_worth_splitting(worker, *job)), {}});
    return picked.back();
  };

  // Passes over the jobs with work (queued chunks or verify copies) in turn, starting after the
  // last one served, until no job can take more or the worker's window is full for every job.
  std::vector<uint64_t> copies;  // verify copies taken for one job
  for (bool progress = !worker.in_flight.full(); progress;) {
    progress = false;
    const size_t candidates = queued_jobs_.size();
    auto it = queued_jobs_.upper_bound(round_robin_after_);
    for (size_t tried = 0; tried < candidates && !queued_jobs_.empty() && !worker.in_flight.full();
         ++tried) {
      if (it == queued_jobs_.end()) it = queued_jobs_.begin();
      const JobId job_id = *it++;  // moved on first: the job may leave the set below
      Job* job = jobs_.at(job_id).get();
      if (!job->has_work()) {
        queued_jobs_.erase(job_id);
        continue;
      }
      // The free part of the window, in this job's chunks (InFlight: jobs fill it by share).
      const uint64_t unit = InFlight::unit_for(worker.window_for(*job, report_interval(), workers_.size()));
      const uint64_t free = worker.in_flight.room(unit);
      if (free == 0) continue;
      // This job's share of the free window (all of it when it is the only job), but never less
      // than a slot's worth: thousands of small jobs would otherwise each put a chunk or two on
      // every worker (a DefineJob per worker per job; 100 clients x 100 jobs took 226 s).
      uint64_t share = std::min(free, std::max<uint64_t>(free / candidates,
                                                         least_worth_splitting(worker, *job)));
      Picked& pick = picked_of(job);
      share = std::min(share, pick.part_left);
      if (share == 0) continue;
      auto& ranges = pick.ranges;
      auto add_range = [&](uint64_t first, uint64_t n) {
        worker.in_flight.add(job->id(), n, unit);
        counters_.tasks_dispatched += n;
        if (!ranges.empty() && ranges.back().first + ranges.back().second == first &&
            uint64_t(ranges.back().second) + n <= UINT32_MAX) {
          ranges.back().second += uint32_t(n);
        } else {
          ranges.emplace_back(first, uint32_t(n));
        }
      };
      // A suspect (its worker died with it, beside others) goes alone to an idle worker.
      if (job->has_suspects() && worker.in_flight.size() == 0) {
        const ChunkRange suspect = job->take_suspect(worker.id);
        add_range(suspect.first, suspect.count);
        worker.isolating = true;
        round_robin_after_ = job->id();
        break;
      }
      // Verify copies first: the partials they wait to compare with are held until they are in.
      uint64_t taken = 0;
      if (job->verify.has_queued()) {
        copies.clear();
        taken = job->verify.take(worker.id, share, someone_else(), copies);
        for (const uint64_t chunk : copies) add_range(chunk, 1);
      }
      while (taken < share && job->has_ordinary()) {
        uint64_t first = 0;
        const uint64_t want = share - taken;
        const uint64_t n = job->take_run(worker.id, want < UINT32_MAX ? want : UINT32_MAX, first);
        taken += n;
        add_range(first, n);
      }
      if (!job->has_work()) queued_jobs_.erase(job_id);
      if (taken == 0) continue;  // only verify copies this worker already computed
      pick.part_left -= taken;
      round_robin_after_ = job->id();
      progress = true;
    }
  }

  for (const Picked& pick : picked) {
    if (pick.ranges.empty()) continue;
    Job* job = pick.job;  // not a structured binding: the lambda below captures it, and C++17 lambdas cannot capture structured bindings
    if (worker.defined_jobs.insert(job->id()).second) {
      defined_on_[job->id()].push_back(worker.id);
      send_message(*worker.conn, [&](wire::Message::Builder m) {
        auto d = m.initDefineJob();
        d.setJobId(job->id());
        to_wire(*job->spec(), d.initSpec());
        d.setChunkPartials(job->chunk_partials());
      });
    }
    capnp::MallocMessageBuilder m(64 + pick.ranges.size() * 4);
    auto batch = m.initRoot<wire::Message>().initTaskBatch();
    batch.setJobId(job->id());
    batch.setReportIntervalUs(uint32_t(report_interval().count()));
    auto list = batch.initRanges(uint32_t(pick.ranges.size()));
    for (size_t i = 0; i < pick.ranges.size(); ++i) {
      list[uint32_t(i)].setFirst(pick.ranges[i].first);
      list[uint32_t(i)].setCount(pick.ranges[i].second);
    }
    worker.conn->send(m);
  }
}

bool Scheduler::split_tail(WorkerRecord& idle) {
  if (idle.in_flight.size() > 0 || idle.isolating || jobs_.empty() || !idle.conn->is_open()) return false;
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
  std::vector<TailHolder> holders;
  for (const auto& [id, w] : workers_) {
    if (w.get() == &idle || w->giving_back_to != 0 || w->isolating || w->in_flight.size() < 2 || !w->conn->is_open())
      continue;
    const double per_element = w->measured_seconds_per_element();
    // An idle worker not measured yet is taken to be as fast as a holder of its kind only.
    if (idle_per_element == 0 && (w->backend != idle.backend || w->device_name != idle.device_name)) continue;
    for (const auto& [job_id, held] : w->in_flight.by_job()) {
      auto jit = jobs_.find(job_id);
      if (jit == jobs_.end()) continue;
      const JobSpec& s = *jit->second->spec();
      const double elements = double(s.chunk_rows * s.chunk_cols);
      // A chunk per unit of parallelism at a time: a CPU worker's threads, a GPU's one device.
      holders.push_back(TailHolder{id, job_id, held.chunks, uint32_t(std::max(1.0, parallelism(*w))),
                                   per_element * elements, idle_per_element * elements});
    }
  }
  const double interval = std::chrono::duration<double>(report_interval()).count();
  const std::optional<TailHolder> holder = pick_tail_holder(holders, std::max(kMinGiveBackGainSeconds, interval));
  if (!holder) return false;
  WorkerRecord& from = *workers_.at(holder->worker);
  const std::optional<ChunkRange> range =
      back_half(jobs_.at(holder->job)->running_ranges_of(from.id), holder->chunks, holder->parallelism);
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
    if (range.count == 0 || range.first >= job.chunks() || range.count > job.chunks() - range.first ||
        !job.ranges().running_here(range, worker.id)) {
      protocol_error(*worker.conn, fmt::format("gave back {} chunks from chunk {} of job {}, which it does not hold",
                                               range.count, range.first, job.id()));
      return;
    }
  }
  uint64_t returned = 0;
  for (auto r : batch.getReturned())
    if (job.give_back(ChunkRange{r.getFirst(), r.getCount()}, worker.id)) returned += r.getCount();
  if (returned == 0) {  // all started: the idle worker waits for the next report
    tail_idle_ = to;
    return;
  }
  worker.in_flight.remove(job.id(), returned);
  counters_.tasks_given_back += returned;
  queued_jobs_.insert(job.id());
  // To the idle worker that asked, whole; to the others if it cannot take it all (or left).
  if (auto idle = workers_.find(to); idle != workers_.end()) dispatch_to(*idle->second, /*sharing=*/1);
  dispatch();
}

}  // namespace psched
