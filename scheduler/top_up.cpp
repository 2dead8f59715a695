#include "scheduler/top_up.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/check.h"

namespace psched {

namespace {

// The top-up being planned: one JobTopUp per job served, found by a look along the few entries of
// most top-ups, and by id once there are more (a GPU window holds hundreds of small jobs).
class Plan {
 public:
  explicit Plan(WorkerRecord& worker) : worker_(worker) {}

  // The job's entry, made on first use.
  JobTopUp& of(Job& job) {
    if (index_.empty()) {
      for (JobTopUp& e : plan_)
        if (e.job == &job) return e;
      if (plan_.size() < kLookAlong) {
        plan_.push_back(JobTopUp{&job, {}});
        return plan_.back();
      }
      for (size_t i = 0; i < plan_.size(); ++i) index_.emplace(plan_[i].job->id(), i);
    }
    auto [it, fresh] = index_.try_emplace(job.id(), plan_.size());
    if (!fresh) return plan_[it->second];
    plan_.push_back(JobTopUp{&job, {}});
    return plan_.back();
  }

  // A range taken for the worker: into its window and the job's entry.
  void add(JobTopUp& entry, ChunkRange r, uint64_t unit) {
    if (worker_.in_flight.size() == 0) worker_.progress_at = std::chrono::steady_clock::now();  // from now on
    worker_.in_flight.add(entry.job->id(), r.count, unit, entry.job->spec()->chunk_elements());
    auto& ranges = entry.ranges;
    if (!ranges.empty() && ranges.back().end() == r.first && ranges.back().count + r.count <= UINT32_MAX) {
      ranges.back().count += r.count;
    } else {
      ranges.push_back(r);
    }
  }

  std::vector<JobTopUp> done() {
    plan_.erase(std::remove_if(plan_.begin(), plan_.end(), [](const JobTopUp& e) { return e.ranges.empty(); }),
                plan_.end());
    return std::move(plan_);
  }

 private:
  static constexpr size_t kLookAlong = 16;  // entries before the index is built
  WorkerRecord& worker_;
  std::vector<JobTopUp> plan_;
  std::unordered_map<JobId, size_t> index_;  // empty until plan_ has kLookAlong entries
};

// What one job takes in its turn: a lone suspect, or verify copies then ordinary runs up to
// `share`. Returns the chunks taken (a suspect isolates the worker: the caller stops there).
uint64_t take_turn(Plan& plan, JobTopUp& entry, WorkerRecord& worker, uint64_t share, uint64_t unit,
                   const TopUpContext& context) {
  Job& job = *entry.job;
  // A suspect (its worker died with it, beside others) goes alone to an idle worker.
  if (job.has_suspects() && worker.in_flight.size() == 0) {
    const ChunkRange suspect = job.take_suspect(worker.id);
    plan.add(entry, suspect, unit);
    worker.isolating = true;
    return suspect.count;
  }
  uint64_t taken = 0;
  if (job.verify.has_queued()) {
    std::vector<ChunkRange> copies;
    taken = job.verify.take(worker.id, share, *context.peers, copies);
    for (const ChunkRange& r : copies) plan.add(entry, r, unit);
  }
  // A retry goes to a worker it has not failed on while one is connected: a file missing or
  // unreadable on one node fails there again, and must not fail the job (issue 44).
  const std::vector<std::string>* failed_on = job.next_retry_failed_on();
  const bool elsewhere = failed_on != nullptr && context.retry != nullptr &&
                         std::find(failed_on->begin(), failed_on->end(), worker.name) != failed_on->end() &&
                         context.retry->someone_not_named(*failed_on);
  while (taken < share && (elsewhere ? job.has_fresh() : job.has_ordinary())) {
    uint64_t first = 0;
    const uint64_t want = std::min<uint64_t>(share - taken, UINT32_MAX);
    const uint64_t n = job.take_run(worker.id, want, first, /*fresh_only=*/elsewhere);
    taken += n;
    plan.add(entry, ChunkRange{first, n}, unit);
  }
  return taken;
}

}  // namespace

void WorkQueue::update(Job& job) {
  auto it = jobs_.find(job.id());
  if (it != jobs_.end()) queued_elements_ -= it->second.elements;
  if (!job.has_work()) {
    if (it != jobs_.end()) jobs_.erase(it);
    return;
  }
  const unsigned __int128 elements = (unsigned __int128)(job.queued() + job.verify.queued()) * job.spec()->chunk_elements();
  if (it == jobs_.end()) it = jobs_.emplace(job.id(), Entry{&job, 0}).first;
  it->second.elements = uint64_t(std::min<unsigned __int128>(elements, UINT64_MAX));
  queued_elements_ += it->second.elements;
}

void WorkQueue::forget(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  queued_elements_ -= it->second.elements;
  jobs_.erase(it);
}

uint64_t least_worth_splitting(const WorkerRecord& worker, const Job& job) {
  const uint64_t chunk_elements = job.spec()->chunk_elements();
  const uint64_t slot_elements = worker.window_elements / std::max<uint64_t>(1, worker.slots);
  return std::max<uint64_t>(1, (slot_elements + chunk_elements - 1) / chunk_elements);
}

uint64_t least_turn(const WorkerRecord& worker, const WorkerPace& pace, const Job& job,
                    std::chrono::microseconds report_interval) {
  const uint64_t splitting = least_worth_splitting(worker, job);
  if (pace.seconds_per_element <= 0) return splitting;
  const double chunk_seconds = pace.chunk_seconds(job.spec()->chunk_elements(), pace.seconds_per_element);
  const double interval = std::chrono::duration<double>(report_interval).count();
  return std::max(splitting, uint64_t(std::min(interval / chunk_seconds, double(kMaxTimedWindowChunks))));
}

std::vector<JobTopUp> plan_top_up(WorkerRecord& worker, WorkQueue& queue, const TopUpContext& context) {
  if (worker.isolating && worker.in_flight.size() > 0) return {};  // a suspect runs alone
  if (worker.stalled) return {};  // until it reports again (Scheduler::check_stalls)
  worker.isolating = false;
  Plan plan(worker);
  // What this top-up may take over all jobs, in elements: the worker's part of all the work
  // queued (guided self-scheduling), so the first workers do not fill deep windows with a storm of
  // small jobs while the others idle; a job worth no split is taken whole all the same. Over the
  // whole fleet, the part is of the work queued and held, less what the worker holds: windows are
  // filled to one level, so they drain together and the queue empties when all hold the same. (Of
  // the queue alone, the workers reporting first in each round of a draining queue took the most,
  // and the last ran dry: bench/README.md, "Figures once in code comments".)
  const double sharing = double(std::max<uint64_t>(1, context.sharing));
  double budget = queue.queued_elements() / sharing;
  if (context.fleet_in_flight_elements)
    budget = (queue.queued_elements() + double(*context.fleet_in_flight_elements)) / sharing -
             double(worker.in_flight.elements());
  // A job's window on this worker, over the work queued now, in its chunks.
  const WorkerPace& pace = context.pace ? *context.pace : WorkerPace::unmeasured();
  const auto window_of = [&](const Job& job) {
    return window_for(worker, pace, job, context.report_interval, queue.queued_elements() / sharing,
                      context.kind_seconds_per_element);
  };
  // What is left of the budget, in a job's chunks, but never less than what is worth splitting.
  const auto chunks_in_budget = [&](const Job& job) {
    return std::max(uint64_t(std::min(std::ceil(budget / double(job.spec()->chunk_elements())), 0x1p62)),
                    least_worth_splitting(worker, job));
  };
  // Where a few jobs compete, a job whose queued chunks all fit in a share of its window (a window
  // over the jobs queued) is taken whole first, past a full window if need be: a small job behind
  // huge ones is not let in in crumbs as their chunks leave (each top-up's room went to a huge job's
  // report interval of chunks first, and the small job got what was left, a few chunks a turn:
  // bench/README.md, "Figures once in code comments"). The window overfills
  // by at most one share per such job, so by at most the window in all; in a fleet it is still the
  // worker's part. It walks every job queued, so only up to kMaxJobsTakenWhole of them: a storm of
  // thousands of jobs (a share of a chunk or two each) keeps the turns below.
  const uint64_t jobs_queued = queue.size();
  const bool few = jobs_queued > 1 && jobs_queued <= kMaxJobsTakenWhole;
  for (auto it = queue.jobs().begin(); few && it != queue.jobs().end() && budget > 0 && !worker.isolating;) {
    Job& job = *(it++)->second.job;  // moved on first: the job may leave the queue below
    const uint64_t queued = job.queued();
    if (queued == 0 || job.has_suspects() || job.verify.has_queued()) continue;
    const uint64_t window = window_of(job);
    if (queued > window / jobs_queued) continue;
    // Within the worker's part of the work, as below: a fleet still spreads a small job.
    const uint64_t taken = take_turn(plan, plan.of(job), worker, std::min(queued, chunks_in_budget(job)),
                                     WorkerWindow::unit_for(window), context);
    budget -= double(taken) * double(job.spec()->chunk_elements());
    queue.update(job);
  }
  // Passes over the jobs in turn until no job can take more or the window is full for every job.
  for (bool progress = !worker.in_flight.full(); progress && budget > 0;) {
    progress = false;
    const size_t candidates = queue.size();
    auto it = queue.jobs().upper_bound(queue.served_last());
    for (size_t tried = 0; tried < candidates && !queue.empty() && !worker.in_flight.full() && budget > 0; ++tried) {
      if (it == queue.jobs().end()) it = queue.jobs().begin();
      Job& job = *(it++)->second.job;  // moved on first: the job may leave the queue below
      if (!job.has_work()) {
        queue.update(job);
        continue;
      }
      // The free part of the window, in this job's chunks (WorkerWindow: jobs fill it by share).
      const uint64_t unit = WorkerWindow::unit_for(window_of(job));
      const uint64_t free = worker.in_flight.room(unit);
      if (free == 0) continue;
      // This job's share of the free window (all of it when it is the only job), but never less
      // than a turn's worth (least_turn): thousands of small jobs would otherwise each put a chunk
      // or two on every worker (a DefineJob per worker per job: bench/README.md).
      // Within the budget (chunks_in_budget).
      const uint64_t share = std::min(
          {free, std::max<uint64_t>(free / candidates, least_turn(worker, pace, job, context.report_interval)),
           chunks_in_budget(job)});
      const uint64_t taken = take_turn(plan, plan.of(job), worker, share, unit, context);
      budget -= double(taken) * double(job.spec()->chunk_elements());
      queue.update(job);
      if (taken == 0) continue;  // only verify copies this worker already computed
      queue.served(job.id());
      if (worker.isolating) return plan.done();  // a suspect runs alone
      progress = true;
    }
  }
  return plan.done();
}

}  // namespace psched
