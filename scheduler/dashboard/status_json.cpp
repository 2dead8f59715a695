#include "scheduler/dashboard/status_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/worker_info_json.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The worker as pbench and Python show it too (worker_info_json's members), and what only psched
// knows: its work in flight, rates over the last samples, memory in use, the verify mismatches it
// caused, and whether it is a straggler.
void write_worker(JsonText& out, const WorkerRecord& w, const WorkerRates& rates, Clock::time_point now,
                  uint64_t verify_mismatches, bool slow) {
  const WorkerRates::Rate rate = rates.rate(w, now);
  out.begin_object();
  write_worker_info_members(out, w);
  out.key("tasks_in_flight").value(w.in_flight.size());
  out.key("uptime_seconds").value(seconds_between(w.joined, now));
  out.key("throughput_bytes_per_second").value(rate.bytes_per_second);
  out.key("chunks_per_second").value(rate.chunks_per_second);
  out.key("verify_mismatches").value(verify_mismatches);
  // Workers that do not report memory in use send 0: say "unknown" rather than "empty".
  out.key("memory_used_bytes");
  if (w.memory_used_bytes) {
    out.value(w.memory_used_bytes);
  } else {
    out.null();
  }
  out.key("utilisation");
  if (rate.utilisation >= 0) {
    out.value(rate.utilisation);
  } else {
    out.null();
  }
  out.key("slow").value(slow);
  out.key("stalled").value(w.stalled);  // holding work, no progress: its work ran elsewhere
  out.end_object();
}

void write_devices(JsonText& out, const std::vector<DeviceShare>& shares) {
  out.begin_array();
  for (const DeviceShare& d : shares) write_device_share(out, d);
  out.end_array();
}

std::string client_name(const Scheduler& s, ClientId id) {
  auto it = s.clients().find(id);
  return it != s.clients().end() ? it->second->name : fmt::format("client {}", id);
}

void write_running_job(JsonText& out, const Scheduler& s, const Job& job, bool devices) {
  const double seconds = job.seconds();
  const double bytes = double(job.spec()->bytes());
  const double done_bytes = job.chunks() ? bytes * double(job.done()) / double(job.chunks()) : 0;
  uint64_t running = 0;
  for (const auto& [wid, w] : s.workers()) running += w->in_flight.of_job(job.id());
  out.begin_object();
  out.key("id").value(job.id());
  out.key("client").value(client_name(s, job.client()));
  out.key("description").value(describe(*job.spec()));
  out.key("state").value("running");
  out.key("chunks").value(job.chunks());
  out.key("chunks_done").value(job.done());
  out.key("chunks_running").value(running);
  out.key("chunks_queued").value(job.queued());
  out.key("retries").value(job.retries());
  out.key("bytes").value(job.spec()->bytes());
  out.key("seconds").value(seconds);
  out.key("progress").value(job.chunks() ? double(job.done()) / double(job.chunks()) : 1.0);
  out.key("throughput_bytes_per_second").value(seconds > 0 ? done_bytes / seconds : 0.0);
  out.key("workers").value(job.workers_used());
  out.key("running_sum").value(job.running_sum());
  // Per-worker share of the finished chunks (the job counts them as they finish).
  out.key("per_worker").begin_array();
  for (const auto& [wid, n] : job.done_by()) {
    auto wit = s.workers().find(wid);
    const double share = bytes * double(n) / double(job.chunks());
    out.begin_object();
    if (wit != s.workers().end()) {
      out.key("worker").value(wit->second->name);
    } else {
      out.key("worker").value(fmt::format("worker {}", wid));
    }
    out.key("chunks_done").value(n);
    out.key("throughput_bytes_per_second").value(seconds > 0 ? share / seconds : 0.0);
    out.end_object();
  }
  out.end_array();
  if (devices) {
    out.key("devices");
    write_devices(out, s.job_devices().shares(job.id()));
  }
  out.end_object();
}

void write_recent_job(JsonText& out, const Scheduler& s, const JobSummary& r, bool devices) {
  const double done_bytes =
      r.chunks ? double(r.bytes) * double(r.chunks_done) / double(r.chunks) : 0.0;
  out.begin_object();
  out.key("id").value(r.id);
  out.key("client").value(r.client);
  out.key("description").value(describe(*r.spec));
  out.key("state").value(r.state);
  out.key("message").value(r.message);
  out.key("chunks").value(r.chunks);
  out.key("chunks_done").value(r.chunks_done);
  out.key("retries").value(r.retries);
  out.key("bytes").value(r.bytes);
  out.key("seconds").value(r.seconds);
  out.key("progress").value(r.chunks ? double(r.chunks_done) / double(r.chunks) : 1.0);
  out.key("throughput_bytes_per_second").value(r.seconds > 0 ? done_bytes / r.seconds : 0.0);
  out.key("workers").value(r.workers);
  out.key("sum").value(r.sum);
  out.key("count").value(r.count);
  if (r.var) {  // a var/std job's, ddof 0
    out.key("var").value(*r.var);
    out.key("std").value(*r.std);
  }
  out.key("finished_unix").value(std::chrono::duration<double>(r.finished.time_since_epoch()).count());
  if (devices) {
    out.key("devices");
    write_devices(out, s.job_devices().shares(r.id));
  }
  out.end_object();
}

// The burn-ins running (pbench --burn's watchers report them): each GPU's verdict so far.
void write_burns(JsonText& out, const BurnBoard& burns) {
  out.key("burns").begin_array();
  for (const auto& [client, b] : burns.burns()) {
    out.begin_object();
    out.key("client_id").value(uint64_t(client));
    out.key("client").value(b.client);
    out.key("verdict").value(burn_verdict_name(b.status.verdict));
    out.key("elapsed_seconds").value(b.status.elapsed_seconds);
    out.key("total_seconds").value(b.status.total_seconds);
    out.key("gpus").begin_array();
    for (const BurnGpuStatus& g : b.status.gpus) {
      out.begin_object();
      out.key("worker").value(g.worker);
      out.key("verdict").value(burn_verdict_name(g.verdict));
      out.key("reason").value(g.reason);
      out.key("bytes_per_second").value(g.bytes_per_second);
      out.key("chunks").value(g.chunks);
      out.key("mismatches").value(g.mismatches);
      out.key("gone").value(g.gone);
      out.end_object();
    }
    out.end_array();
    out.end_object();
  }
  out.end_array();
}

// Verify's figures (mismatches by worker name, including workers that have left since) and the
// scheduler's counters.
void write_verify_and_counters(JsonText& out, const SchedulerCounters& c) {
  uint64_t mismatches = 0;
  for (const auto& [name, n] : c.verify_mismatches) mismatches += n;
  out.key("verify").begin_object();
  out.key("chunks").value(c.verify_chunks);
  out.key("mismatches").value(mismatches);
  out.key("mismatches_by_worker").begin_object();
  for (const auto& [name, n] : c.verify_mismatches) out.key(name).value(n);
  out.end_object();
  out.end_object();
  out.key("counters").begin_object();
  out.key("jobs_submitted").value(c.jobs_submitted);
  out.key("jobs_completed").value(c.jobs_completed);
  out.key("jobs_failed").value(c.jobs_failed);
  out.key("jobs_cancelled").value(c.jobs_cancelled);
  out.key("tasks_dispatched").value(c.tasks_dispatched);
  out.key("tasks_done").value(c.tasks_done);
  out.key("tasks_requeued").value(c.tasks_requeued);
  out.key("tasks_given_back").value(c.tasks_given_back);
  out.key("tasks_failed").value(c.tasks_failed);
  out.key("bytes_reduced").value(c.bytes_reduced);
  out.key("connections_refused").value(c.connections_refused);
  out.key("protocol_errors").value(c.protocol_errors);
  out.end_object();
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

std::string status_json(const Scheduler& s, const WorkerRates& rates, const std::string& dashboard_url,
                        bool devices) {
  const auto now = Clock::now();
  const SchedulerCounters& c = s.counters();
  // Room for what the last one took: the text is not copied as it grows to megabytes.
  static thread_local size_t last_bytes = 0;
  JsonText out(last_bytes + last_bytes / 8);
  out.begin_object();
  out.key("scheduler").begin_object();
  out.key("version").value(PSCHED_VERSION);
  out.key("protocol_version").value(uint64_t(wire::PROTOCOL_VERSION));
  out.key("address").value(s.address());
  out.key("dashboard").value(dashboard_url);
  out.key("uptime_seconds").value(seconds_between(s.started(), now));
  out.key("token_required").value(!s.config().token.empty());
  out.end_object();
  uint64_t queued = 0, running = 0;
  const std::set<WorkerId> slow = s.job_devices().slow_workers();
  out.key("workers").begin_array();
  for (const auto& [id, w] : s.workers()) {
    auto bad = c.verify_mismatches.find(w->name);
    write_worker(out, *w, rates, now, bad == c.verify_mismatches.end() ? 0 : bad->second, slow.count(id) > 0);
    running += w->in_flight.size();
  }
  out.end_array();
  out.key("clients").value(s.clients().size());
  out.key("client_unsent_bytes").value(s.client_unsent_bytes());
  out.key("jobs").begin_array();
  for (const auto& [id, job] : s.jobs()) {
    write_running_job(out, s, *job, devices);
    queued += job->queued() + job->verify.queued();
  }
  out.end_array();
  out.key("recent_jobs").begin_array();
  for (const JobSummary& r : s.recent_jobs()) write_recent_job(out, s, r, devices);
  out.end_array();
  write_burns(out, s.burns());
  out.key("tasks").begin_object();
  out.key("queued").value(queued);
  out.key("running").value(running);
  out.end_object();
  write_verify_and_counters(out, c);
  out.end_object();
  last_bytes = out.text().size();
  return out.take();
}

std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace psched
