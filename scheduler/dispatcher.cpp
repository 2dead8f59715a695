#include "scheduler/dispatcher.h"

#include <algorithm>

#include "core/check.h"

namespace psched {

std::chrono::microseconds Dispatcher::report_interval() const {
  const auto fleet = kReportCostPerWorker * int64_t(workers_.size());
  return std::clamp(fleet, kReportInterval, kMaxReportInterval);
}

std::vector<Dispatcher::TopUp> Dispatcher::plan_round() {
  std::vector<TopUp> planned;
  uint64_t left = workers_.size();
  const auto start = workers_.lower_bound(dispatch_from_);
  auto visit = [&](auto first, auto last) {
    for (auto it = first; it != last && !work_.empty(); ++it) {
      const size_t before = planned.size();
      top_up(*it->second, left--, planned);
      if (planned.size() > before) dispatch_from_ = it->first;
    }
  };
  visit(start, workers_.end());
  visit(workers_.begin(), start);
  return planned;
}

Dispatcher::Plan Dispatcher::plan_for(WorkerRecord& worker, uint64_t sharing,
                                      std::chrono::steady_clock::time_point now) {
  Plan plan;
  if (!reachable_(worker)) return plan;
  if (!work_.empty()) {
    top_up(worker, sharing, plan.top_ups);
    return plan;
  }
  note_idle(worker);
  // A job's tail: an idle worker asks for part of the longest share; if no share could be judged
  // yet (no speed measured), it waits, and the next report from a busy worker asks again.
  if (worker.in_flight.size() == 0) {
    plan.give_back = split_tail(worker, now);
    tail_idle_ = plan.give_back ? 0 : worker.id;
  } else if (tail_idle_ != 0) {
    auto it = workers_.find(tail_idle_);
    if (it == workers_.end() || it->second->in_flight.size() > 0 ||
        (plan.give_back = split_tail(*it->second, now)))
      tail_idle_ = 0;
  }
  return plan;
}

void Dispatcher::top_up(WorkerRecord& worker, uint64_t sharing, std::vector<TopUp>& planned) {
  if (!reachable_(worker)) return;
  TopUpContext context{report_interval(), sharing > 0 ? sharing : workers_.size(), &verify_,
                       sharing > 0 ? nullptr : &in_flight_elements_};
  context.retry = &retry_;
  context.pace = &depth_.pace(worker.id);
  if (context.pace->seconds_per_element <= 0 && worker.backend == "cuda")
    context.kind_seconds_per_element = kind_seconds_per_element(worker.device_name);
  std::vector<JobTopUp> jobs = plan_top_up(worker, work_, context);
  if (!jobs.empty()) planned.push_back(TopUp{&worker, std::move(jobs)});
  note_idle(worker);
}

void Dispatcher::note_idle(const WorkerRecord& worker) {
  if (worker.in_flight.size() == 0) {
    idle_.insert(worker.id);
  } else {
    idle_.erase(worker.id);
  }
}

std::optional<Dispatcher::GiveBack> Dispatcher::split_tail(WorkerRecord& idle,
                                                           std::chrono::steady_clock::time_point now) {
  if (idle.in_flight.size() > 0 || idle.isolating || idle.stalled || jobs_.empty() || !reachable_(idle))
    return std::nullopt;
  // A look over every worker's share costs O(workers x jobs): only for a few big jobs' tails (a
  // crowd of small jobs has nothing worth splitting, and looking cost a storm of them most of
  // psched's CPU: bench/README.md, "Figures once in code comments"), and at most once a period, so
  // that a fleet of thousands going idle at a job's end does not cost psched a quadratic tail.
  if (jobs_.size() > kMaxJobsToSplit) return std::nullopt;
  if (now < next_split_look_) return std::nullopt;
  next_split_look_ = now + std::max<std::chrono::microseconds>(kSplitTailPeriod,
                                                                kSplitTailCostPerWorker * int64_t(workers_.size()));
  // The holders of the jobs' running chunks (every job is running or done: nothing is queued).
  const double idle_per_element = depth_.measured_seconds_per_element(idle) / std::max(1.0, parallelism(idle));
  std::vector<TailHolder>& holders = tail_holders_;
  holders.clear();
  for (const auto& [id, w] : workers_) {
    if (w.get() == &idle || w->giving_back_to != 0 || w->isolating || w->stalled || w->in_flight.size() < 2 ||
        !reachable_(*w))
      continue;
    const double per_element = depth_.measured_seconds_per_element(*w);
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
  if (!holder) return std::nullopt;
  WorkerRecord& from = *must_find(workers_, holder->worker);
  const std::optional<ChunkRange> range =
      back_half(must_find(jobs_, holder->job)->running_ranges_of(from.id), holder->chunks, holder->parallelism);
  if (!range) return std::nullopt;
  from.giving_back_to = idle.id;
  return GiveBack{&from, holder->job, *range};
}

}  // namespace psched
