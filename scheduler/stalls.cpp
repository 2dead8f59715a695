// Stalled workers: one that holds work and reports no progress for much longer than that work
// should take (stall.h) has a device call that does not return, though its heartbeat goes on. Its
// work runs elsewhere, unblamed (it is no poison chunk); it stays connected but gets nothing until
// it reports again, and what it sends meanwhile for chunks no longer its own is late, not a
// protocol error (the first result of a chunk wins: RangeTable ignores a late duplicate). The
// clients of the jobs it held are told, and /api/status names it.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/check.h"
#include "core/plural.h"
#include "scheduler/scheduler.h"
#include "scheduler/stall.h"

namespace psched {

double Scheduler::stall_bound(const WorkerRecord& w) const {
  uint64_t chunk_elements = 0;
  for (const auto& [job_id, held] : w.in_flight.by_job())
    if (auto it = jobs_.find(job_id); it != jobs_.end())
      chunk_elements = std::max(chunk_elements, it->second->spec()->chunk_elements());
  double per_element = dispatcher_.measured_seconds_per_element(w);
  if (per_element <= 0) per_element = dispatcher_.kind_seconds_per_element(w.device_name);
  return stall_bound_seconds(config_.stall_timeout_ms / 1000.0, chunk_elements, per_element,
                             std::chrono::duration<double>(report_interval()).count());
}

void Scheduler::check_stalls() {
  if (config_.stall_timeout_ms == 0) return;
  const auto now = std::chrono::steady_clock::now();
  std::vector<WorkerId> stalled;
  for (const auto& [id, w] : workers_) {
    if (w->stalled || w->in_flight.size() == 0 || !w->conn->is_open()) continue;
    // Silence while psched itself was stopped (a VM pause) is no worker's fault: judged from its end.
    const auto silent_since = watchdog_->silent_since(w->progress_at, now);
    if (std::chrono::duration<double>(now - silent_since).count() > stall_bound(*w)) stalled.push_back(id);
  }
  for (const WorkerId id : stalled) stall_worker(*must_find(workers_, id));
  if (!stalled.empty()) dispatch();
}

void Scheduler::stall_worker(WorkerRecord& w) {
  const double silent = std::chrono::duration<double>(std::chrono::steady_clock::now() - w.progress_at).count();
  const std::string what = fmt::format("'{}' stalled: no progress for {:.1f} s while holding {}; its work "
                                       "runs elsewhere, and it gets none until it reports again",
                                       w.name, silent, counted(w.in_flight.size(), "chunk"));
  spdlog::warn("worker {} {}", w.id, what);
  w.stalled = w.stalled_once = true;
  ++counters_.workers_stalled;
  std::vector<JobId> held;
  for (const auto& [job_id, h] : w.in_flight.by_job()) held.push_back(job_id);
  for (const JobId job_id : held) {
    w.in_flight.forget_job(job_id);
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) continue;
    Job& job = *it->second;
    requeue_lost(job, w, "stalled", Loss::kLeft);
    job.notices.push_back("worker " + what);
  }
  // Verify copies it runs go to others, and a search that needs its copy ends (it is not blamed).
  for (auto& [job_id, job] : jobs_) {
    if (job->verify.holding() == 0) continue;
    verify_worker_gone(*job, w, "stalled", Loss::kLeft);
    dispatcher_.job_changed(*job);
  }
  for (const JobId job_id : held)
    if (auto it = jobs_.find(job_id); it != jobs_.end()) {
      if (it->second->complete()) {
        complete_job(*it->second);
      } else {
        send_progress(*it->second, /*force=*/true);
      }
    }
}

// A ResultBatch from a stalled worker: it makes progress again, and may have work.
void Scheduler::progress_from(WorkerRecord& w) {
  w.progress_at = std::chrono::steady_clock::now();
  if (!w.stalled) return;
  w.stalled = false;
  spdlog::info("worker {} '{}' reports again after a stall: it gets work again", w.id, w.name);
}

}  // namespace psched
