// Jobs through their life in the scheduler: a Submit becomes a Job, Progress streams to its client,
// and it ends done, failed or cancelled (and is remembered for the dashboard); a worker that leaves
// or dies hands its running chunks back. ResultBatches fold into a job in results.cpp, connections
// and Hello are in scheduler.cpp (who is admitted in registration.cpp), keeping windows full in
// dispatch.cpp.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "app/logging.h"
#include "core/plural.h"
#include "core/variance.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

void Scheduler::on_submit(ClientRecord& client, wire::Submit::Reader submit) {
  JobSpec spec = from_wire(submit.getSpec());
  const double verify_fraction = submit.getVerifyFraction();
  Status st = validate(spec);
  if (st) st = validate_verify_fraction(verify_fraction);
  if (!st) {
    send_message(*client.conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(0);
      f.setTag(submit.getTag());
      f.setMessage(fmt::format("invalid job: {}", st.message()));
    });
    job_refusals_.warn(fmt::format("client {} '{}': refused job: {}", client.id, client.name,
                                   st.message()));
    return;
  }
  const JobSpec job_spec = normalized(spec);
  const uint64_t chunks = job_spec.chunks();
  if (Status st = admit_job(client.jobs.size(), jobs_.size(), config_.admission); !st) {
    send_message(*client.conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(0);
      f.setTag(submit.getTag());
      f.setMessage(st.message());
    });
    job_refusals_.warn(fmt::format("client {} '{}': refused a job of {}: {}", client.id,
                                   client.name, counted(chunks, "chunk"), st.message()));
    return;
  }
  const JobId id = next_job_id_++;
  auto job = std::make_unique<Job>(id, client.id, std::make_shared<const JobSpec>(job_spec),
                                   submit.getWantPartials());
  if (verify_fraction > 0)
    job->verify = BlockVerifier(verify_fraction, job_spec.seed, chunks,
                                job->want_partials() ? 1 : verify_block_chunks(chunks, job_spec.chunk_elements()));
  ++counters_.jobs_submitted;
  if (spdlog::should_log(spdlog::level::info))  // describe() is not free: tiny jobs notice
    spdlog::info("job {} from client '{}': {} ({})", id, client.name, describe(spec),
                 counted(job->chunks(), "chunk"));
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto a = m.initJobAccepted();
    a.setTag(submit.getTag());
    a.setJobId(id);
    a.setChunks(job->chunks());
  });
  client.jobs.insert(id);
  if (submit.getWantTimeline()) want_timeline_.insert(id);
  dispatcher_.job_changed(*job);
  Job& accepted = *(jobs_[id] = std::move(job));
  if (workers_.empty()) send_progress(accepted, /*force=*/true);  // "no workers" at once
  // A job with a chunk for every worker is spread over the fleet: the big jobs that arrive
  // together share one round of it. A smaller one goes at once (a storm of small jobs dispatched
  // in rounds was spread as thinly, at more messages: bench/README.md).
  if (accepted.chunks() >= workers_.size()) {
    dispatch_soon();
  } else {
    dispatch();
  }
}

void Scheduler::send_progress(Job& job, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - job.last_progress < std::chrono::milliseconds(50)) return;
  job.last_progress = now;
  auto cit = clients_.find(job.client());
  if (cit == clients_.end()) return;
  size_t sent = 0;
  do {
    const size_t n = std::min(job.unsent_partials.size() - sent, kMaxPartialsPerProgress);
    OutgoingMessage m(256 + n * 6);
    auto p = m.initRoot<wire::Message>().initProgress();
    p.setJobId(job.id());
    p.setChunksDone(job.done());
    p.setChunksTotal(job.chunks());
    p.setRunningSum(job.running_sum());
    p.setNoWorkers(workers_.empty());
    if (sent == 0 && !job.notices.empty()) {
      auto notices = p.initNotices(uint32_t(job.notices.size()));
      for (uint32_t i = 0; i < notices.size(); ++i) notices.set(i, job.notices[i]);
    }
    if (n > 0) {
      auto list = p.initPartials(uint32_t(n));
      for (size_t i = 0; i < n; ++i) {
        const auto& [chunk, partial] = job.unsent_partials[sent + i];
        to_wire(chunk, partial, list[uint32_t(i)]);
      }
    }
    sent += n;
    cit->second->conn->send(m);
  } while (sent < job.unsent_partials.size());
  job.unsent_partials.clear();
  job.notices.clear();
}

void Scheduler::complete_job(Job& job) {
  send_progress(job, /*force=*/true);
  const CompactPartial total = job.result();
  ++counters_.jobs_completed;
  if (spdlog::should_log(spdlog::level::info)) {  // the words are made only to be logged
    spdlog::info("job {} done: {} in {:.3f} s on {}, sum {:.17g}, count {}", job.id(), counted(job.chunks(), "chunk"),
                 job.seconds(), counted(job.workers_used(), "worker"), total.sum, total.count);
    if (job.verify.on())
      spdlog::info("job {} verify: {} compared, {}", job.id(), counted(job.verify.verified(), "chunk"),
                   counted(job.verify.mismatch_count(), "mismatch", "mismatches"));
  }
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    send_message(*cit->second->conn, [&](wire::Message::Builder m) {
      auto r = m.initJobResult();
      r.setJobId(job.id());
      r.setSum(total.sum);
      r.setCount(total.count);
      r.setMin(total.min);
      r.setMax(total.max);
      r.setChunks(job.chunks());
      r.setWorkers(uint32_t(job.workers_used()));
      r.setSeconds(job.seconds());
      r.setRetries(job.retries());
      to_wire(total.exact, r.initExact());
      if (job.spec()->squares) to_wire(total.squares, r.initSquares());
      write_verify_report(job, r);
      report_devices(job, r);
    });
  }
  remember_job(job, "done", "", &total);
  forget_job(job);
}

void Scheduler::fail_job(Job& job, const std::string& message) {
  ++counters_.jobs_failed;
  spdlog::warn("job {} failed: {}", job.id(), message);
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    send_message(*cit->second->conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(job.id());
      f.setMessage(message);
    });
  }
  remember_job(job, "failed", message);
  forget_job(job);
}

void Scheduler::cancel_job(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  ++counters_.jobs_cancelled;
  spdlog::info("job {} cancelled ({} of {} done)", id, it->second->done(),
               counted(it->second->chunks(), "chunk"));
  remember_job(*it->second, "cancelled", "cancelled by its client, or its client left");
  forget_job(*it->second);
  dispatch();
}

void Scheduler::forget_job(Job& job) {
  const JobId id = job.id();
  // A completed job left nothing on any worker: its DropJob waits for the next message to each
  // (send_owed_drops), instead of a write per worker now, which on 1024 workers came before the
  // next job's first windows. A failed or cancelled job's queued chunks must stop now.
  const bool drop_later = job.complete();
  std::optional<OutgoingMessage> drop;
  // Only the workers the job was defined on can hold its chunks (10,000 finished jobs times 1024
  // workers made this loop psched's largest cost).
  if (auto dit = defined_on_.find(id); dit != defined_on_.end()) {
    for (const WorkerId wid : dit->second) {
      auto wit = workers_.find(wid);
      if (wit == workers_.end()) continue;  // left since
      WorkerRecord& w = *wit->second;
      if (w.defined_jobs.erase(id)) {
        if (drop_later) {
          w.drops_owed.push_back(id);
        } else {
          if (!drop) drop.emplace(32).initRoot<wire::Message>().initDropJob().setJobId(id);  // built once
          w.conn->send(*drop);
        }
      }
      // The worker forgets the job's queued chunks; the running ones report and are dropped.
      w.in_flight.forget_job(id);
    }
    defined_on_.erase(dit);
  }
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    cit->second->jobs.erase(id);
  }
  dispatcher_.job_gone(id);
  job_devices_.finish(id);
  want_timeline_.erase(id);
  jobs_.erase(id);  // destroys `job`
}

void Scheduler::send_owed_drops(WorkerRecord& worker) {
  for (const JobId id : worker.drops_owed)
    send_message(*worker.conn, [&](wire::Message::Builder m) { m.initDropJob().setJobId(id); });
  worker.drops_owed.clear();
}

void Scheduler::remember_job(const Job& job, const char* state, const std::string& message, const CompactPartial* total) {
  JobSummary s;
  s.id = job.id();
  auto cit = clients_.find(job.client());
  s.client = cit != clients_.end() ? cit->second->name : fmt::format("client {}", job.client());
  s.spec = job.spec();
  s.state = state;
  s.message = message.substr(0, 1000);
  s.chunks = job.chunks();
  s.chunks_done = job.done();
  s.bytes = job.spec()->bytes();
  s.retries = job.retries();
  s.workers = uint32_t(job.workers_used());
  s.seconds = job.seconds();
  const auto take = [&](const CompactPartial& result) {
    s.sum = result.sum;
    s.count = result.count;
    if (result.has_squares) {
      const ExactSum sum = result.exact.value(), squares = result.squares.value();
      s.var = exact_variance(sum, squares, result.count, 0);
      s.std = exact_std(sum, squares, result.count, 0);
    }
  };
  if (total) {
    take(*total);
  } else if (job.complete()) {
    take(job.result());
  } else {
    s.sum = job.running_sum();
  }
  recent_jobs_.push_front(std::move(s));
  if (recent_jobs_.size() > kRecentJobs) recent_jobs_.pop_back();
}

void Scheduler::remove_worker(WorkerId id, const std::string& why, Loss loss) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  std::unique_ptr<WorkerRecord> w = std::move(it->second);
  workers_.erase(it);
  dispatcher_.worker_left(id);
  spdlog::info("worker {} '{}' {}: {} ({} in flight re-queued{})", id, w->name,
               loss == Loss::kLeft ? "left" : loss == Loss::kThrownOff ? "thrown off" : "lost", why,
               counted(w->in_flight.size(), "chunk"), loss == Loss::kThrownOff ? ", unblamed" : "");
  std::vector<std::pair<JobId, std::string>> to_fail;
  for (const auto& [job_id, held] : w->in_flight.by_job()) {
    auto jit = jobs_.find(job_id);
    if (jit == jobs_.end()) continue;
    // The jobs it held hear why it went (a thrown-off worker's refusal said so already): a device
    // lost says so in its goodbye, pbench --burn keeps it as the GPU's last words.
    if (loss != Loss::kThrownOff && jit->second->notices.size() < Job::kMaxWorkerNotices)
      jit->second->notices.push_back(fmt::format("worker {} '{}' {}: {}", id, w->name,
                                                 loss == Loss::kLeft ? "left" : "lost", why));
    if (auto failure = requeue_lost(*jit->second, *w, why, loss)) to_fail.emplace_back(job_id, *failure);
  }
  // Verify copies, and the searches for an odd chunk that needed this worker, of every job.
  std::vector<JobId> settled;
  for (auto& [job_id, job] : jobs_) {
    if (job->verify.holding() == 0) continue;
    if (auto failure = verify_worker_gone(*job, *w, why, loss)) to_fail.emplace_back(job_id, *failure);
    settled.push_back(job_id);
  }
  for (auto& [job_id, message] : to_fail) {
    auto jit = jobs_.find(job_id);
    if (jit != jobs_.end()) fail_job(*jit->second, message);
  }
  for (const JobId job_id : settled) {
    auto jit = jobs_.find(job_id);
    if (jit == jobs_.end()) continue;
    dispatcher_.job_changed(*jit->second);
    if (jit->second->complete()) complete_job(*jit->second);
  }
  if (shutting_down_) return;
  if (workers_.empty()) tell_clients_about_workers();
  dispatch();
}

// Blame only what was shown (issue 49). A lost worker's chunks are named with what happened to it,
// but count against --allowed-failures only when it ran nothing else: a worker killed from outside,
// cut off or timed out with a window of chunks shows nothing about any one of them. Chunks lost a
// second time go back as a suspect range, to run alone (dispatch.cpp, Job::take_suspect) chunk by
// chunk: innocent neighbours complete, and only a chunk that takes down workers running it alone
// collects counted failures, so the failure names it and what happened to each worker. A suspect
// range too long to run chunk by chunk (a GPU's deep window) runs whole, and is halved, uncounted,
// each time it takes its worker down alone. A worker that left, stalled or was thrown off for a
// protocol error blames nothing: its chunks are retried.
std::optional<std::string> Scheduler::requeue_lost(Job& job, const WorkerRecord& w, const std::string& why,
                                                   Loss loss) {
  const bool alone = w.ran_alone();
  std::vector<ChunkRange> at_limit;
  for (const ChunkRange& r : job.running_ranges_of(w.id)) {
    counters_.tasks_requeued += r.count;
    if (loss != Loss::kLost) {
      job.requeue(r, w.id, w.name, /*blame=*/false);
      continue;
    }
    // A long suspect range that took its worker down alone: halved (Job::kSuspectsOneByOne).
    if (w.isolating && job.requeue_halves(r, w.id, w.name)) continue;
    job.requeue_lost(r, w.id, w.name, why, alone, config_.allowed_failures, at_limit);
    // A chunk shown to take a worker down, short of the limit: its client hears of it now (if the
    // last worker is gone, the job may never reach the limit, and its no-workers failure says this).
    if (alone && r.count == 1 && at_limit.empty())
      job.notices.push_back(fmt::format("chunk {} took down {} ({}), {} running it alone: {}", r.first,
                                        counted(job.failed_on(r.first).size(), "worker"),
                                        fmt::join(job.failure_names(r.first, /*copy=*/false), ", "),
                                        job.shown_failures(r.first).size(),
                                        fmt::join(job.shown_failures(r.first), ", ")));
  }
  dispatcher_.job_changed(job);
  if (at_limit.empty()) return std::nullopt;
  // Only a chunk that ran alone counts, so a range at the limit is one chunk.
  const uint64_t chunk = at_limit.front().first;
  const auto& shown = job.shown_failures(chunk);
  if (shown.size() == job.failures(chunk))
    return fmt::format("chunk {} took down {} running it alone: {}", chunk, counted(shown.size(), "worker"),
                       fmt::join(shown, ", "));
  // Some of its failures were reported by workers (Scheduler::apply_failures), not crashes.
  return fmt::format("chunk {} failed or took down a worker running it alone {} times (on {}); the last one "
                     "was lost: {}", chunk, job.failures(chunk), fmt::join(job.failure_names(chunk, false), ", "), why);
}

void Scheduler::tell_clients_about_workers() {
  if (workers_.empty() && !jobs_.empty())
    spdlog::warn("no workers: {} job{} wait{} for one to join", jobs_.size(),
                 jobs_.size() == 1 ? "" : "s", jobs_.size() == 1 ? "s" : "");
  for (auto& [id, job] : jobs_) send_progress(*job, /*force=*/true);
}

}  // namespace psched
