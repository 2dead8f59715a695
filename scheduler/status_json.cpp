#include "scheduler/status_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/worker_info_json.h"
#include "net/wire_convert.h"
#include "scheduler/performance_json.h"
#include "scheduler/scheduler.h"

namespace psched {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The worker as pbench and Python show it too (worker_info_json), and what only psched knows: its
// work in flight, rates over the last samples, memory in use and the verify mismatches it caused.
json worker_json(const WorkerRecord& w, const WorkerRates& rates, Clock::time_point now,
                 uint64_t verify_mismatches) {
  const WorkerRates::Rate rate = rates.rate(w, now);
  json j = worker_info_json(w);
  j["tasks_in_flight"] = w.in_flight.size();
  j["uptime_seconds"] = seconds_between(w.joined, now);
  j["throughput_bytes_per_second"] = rate.bytes_per_second;
  j["chunks_per_second"] = rate.chunks_per_second;
  j["verify_mismatches"] = verify_mismatches;
  // Workers that do not report memory in use send 0: say "unknown" rather than "empty".
  j["memory_used_bytes"] = w.memory_used_bytes ? json(w.memory_used_bytes) : json(nullptr);
  j["utilisation"] = rate.utilisation >= 0 ? json(rate.utilisation) : json(nullptr);
  return j;
}

std::string client_name(const Scheduler& s, ClientId id) {
  auto it = s.clients().find(id);
  return it != s.clients().end() ? it->second->name : fmt::format("client {}", id);
}

json running_job_json(const Scheduler& s, const Job& job) {
  const double seconds = job.seconds();
  const double bytes = double(job.spec()->bytes());
  const double done_bytes = job.chunks() ? bytes * double(job.done()) / double(job.chunks()) : 0;
  uint64_t running = 0;
  for (const auto& [wid, w] : s.workers()) running += w->in_flight.of_job(job.id());
  json j = {{"id", job.id()},
            {"client", client_name(s, job.client())},
            {"description", describe(*job.spec())},
            {"state", "running"},
            {"chunks", job.chunks()},
            {"chunks_done", job.done()},
            {"chunks_running", running},
            {"chunks_queued", job.queued()},
            {"retries", job.retries()},
            {"bytes", job.spec()->bytes()},
            {"seconds", seconds},
            {"progress", job.chunks() ? double(job.done()) / double(job.chunks()) : 1.0},
            {"throughput_bytes_per_second", seconds > 0 ? done_bytes / seconds : 0.0},
            {"workers", job.workers_used()},
            {"running_sum", job.running_sum()}};
  // Per-worker share of the finished chunks (the job counts them as they finish).
  json per_worker = json::array();
  for (const auto& [wid, n] : job.done_by()) {
    auto wit = s.workers().find(wid);
    const double share = bytes * double(n) / double(job.chunks());
    per_worker.push_back(
        {{"worker", wit != s.workers().end() ? wit->second->name : fmt::format("worker {}", wid)},
         {"chunks_done", n},
         {"throughput_bytes_per_second", seconds > 0 ? share / seconds : 0.0}});
  }
  j["per_worker"] = std::move(per_worker);
  j["devices"] = devices_json(s.job_devices().shares(job.id()));
  return j;
}

json recent_job_json(const JobSummary& r) {
  const double done_bytes =
      r.chunks ? double(r.bytes) * double(r.chunks_done) / double(r.chunks) : 0.0;
  return {{"id", r.id},
          {"client", r.client},
          {"description", describe(*r.spec)},
          {"state", r.state},
          {"message", r.message},
          {"chunks", r.chunks},
          {"chunks_done", r.chunks_done},
          {"retries", r.retries},
          {"bytes", r.bytes},
          {"seconds", r.seconds},
          {"progress", r.chunks ? double(r.chunks_done) / double(r.chunks) : 1.0},
          {"throughput_bytes_per_second", r.seconds > 0 ? done_bytes / r.seconds : 0.0},
          {"workers", r.workers},
          {"sum", r.sum},
          {"count", r.count},
          {"finished_unix", std::chrono::duration<double>(r.finished.time_since_epoch()).count()}};
}

}  // namespace

void WorkerRates::sample(const Scheduler& scheduler, Clock::time_point now) {
  // Forget workers that are gone, then append one sample per worker.
  for (auto it = samples_.begin(); it != samples_.end();) {
    it = scheduler.workers().count(it->first) ? std::next(it) : samples_.erase(it);
  }
  for (const auto& [id, w] : scheduler.workers()) {
    auto& list = samples_[id];
    list.push_back({now, w->bytes_reduced, w->chunks_done, w->busy_seconds});
    while (list.size() > 2 && now - list.front().at > kWindow) list.pop_front();
  }
}

WorkerRates::Rate WorkerRates::rate(const WorkerRecord& w, Clock::time_point now) const {
  Sample first{w.joined, 0, 0, 0};
  auto it = samples_.find(w.id);
  if (it != samples_.end() && it->second.size() >= 2) first = it->second.front();
  const double dt = seconds_between(first.at, now);
  Rate r;
  if (dt <= 0) return r;
  r.bytes_per_second = double(w.bytes_reduced - first.bytes_reduced) / dt;
  r.chunks_per_second = double(w.chunks_done - first.chunks_done) / dt;
  if (const double cap = parallelism(w); cap > 0)
    r.utilisation = std::clamp((w.busy_seconds - first.busy_seconds) / dt / cap, 0.0, 1.0);
  return r;
}

json status_json(const Scheduler& s, const WorkerRates& rates, const std::string& dashboard_url) {
  const auto now = Clock::now();
  const SchedulerCounters& c = s.counters();
  uint64_t queued = 0, running = 0;
  json workers = json::array();
  const std::set<WorkerId> slow = s.job_devices().slow_workers();
  for (const auto& [id, w] : s.workers()) {
    auto bad = c.verify_mismatches.find(w->name);
    workers.push_back(
        worker_json(*w, rates, now, bad == c.verify_mismatches.end() ? 0 : bad->second));
    workers.back()["slow"] = slow.count(id) > 0;
    running += w->in_flight.size();
  }
  json jobs = json::array();
  for (const auto& [id, job] : s.jobs()) {
    jobs.push_back(running_job_json(s, *job));
    queued += job->queued() + job->verify.queued();
  }
  // Verify mismatches by worker name, including workers that have left since.
  uint64_t mismatches = 0;
  json mismatches_by_worker = json::object();
  for (const auto& [name, n] : c.verify_mismatches) {
    mismatches_by_worker[name] = n;
    mismatches += n;
  }
  json recent = json::array();
  for (const JobSummary& r : s.recent_jobs()) {
    recent.push_back(recent_job_json(r));
    recent.back()["devices"] = devices_json(s.job_devices().shares(r.id));
  }
  return {{"scheduler",
           {{"version", PSCHED_VERSION},
            {"protocol_version", wire::PROTOCOL_VERSION},
            {"address", s.address()},
            {"dashboard", dashboard_url},
            {"uptime_seconds", seconds_between(s.started(), now)},
            {"token_required", !s.config().token.empty()}}},
          {"workers", std::move(workers)},
          {"clients", s.clients().size()},
          {"jobs", std::move(jobs)},
          {"recent_jobs", std::move(recent)},
          {"tasks", {{"queued", queued}, {"running", running}}},
          {"verify",
           {{"chunks", c.verify_chunks},
            {"mismatches", mismatches},
            {"mismatches_by_worker", std::move(mismatches_by_worker)}}},
          {"counters",
           {{"jobs_submitted", c.jobs_submitted},
            {"jobs_completed", c.jobs_completed},
            {"jobs_failed", c.jobs_failed},
            {"jobs_cancelled", c.jobs_cancelled},
            {"tasks_dispatched", c.tasks_dispatched},
            {"tasks_done", c.tasks_done},
            {"tasks_requeued", c.tasks_requeued},
            {"tasks_given_back", c.tasks_given_back},
            {"tasks_failed", c.tasks_failed},
            {"bytes_reduced", c.bytes_reduced},
            {"connections_refused", c.connections_refused},
            {"protocol_errors", c.protocol_errors}}}};
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace psched
