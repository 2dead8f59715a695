// Jobs through their life in the scheduler: a Submit becomes a Job, ResultBatches fold into it,
// Progress streams to its client, and it ends done, failed or cancelled (and is remembered for the
// dashboard); a worker that leaves or dies hands its running chunks back. Connections and Hello
// are in scheduler.cpp, keeping windows full in dispatch.cpp.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "app/logging.h"
#include "core/plural.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

namespace {

// Worker names in first-seen order, each once, with how often when more than once (a restarted
// worker keeps its name and may fail a chunk twice): "a x2, b".
std::vector<std::string> distinct(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  std::vector<size_t> times;
  for (const auto& n : names) {
    auto it = std::find(out.begin(), out.end(), n);
    if (it == out.end()) {
      out.push_back(n);
      times.push_back(1);
    } else {
      ++times[size_t(it - out.begin())];
    }
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (times[i] > 1) out[i] += fmt::format(" x{}", times[i]);
  return out;
}

// The workers a chunk (or, for a verify copy, the chunk's copy) failed on, each once, counted.
std::vector<std::string> failed_on(const Job& job, uint64_t chunk, bool copy) {
  return distinct(copy ? job.verify.failed_on(chunk) : job.failed_on(chunk));
}

// Why a batch's results cannot be taken (empty: they can): one names no chunks, covers several
// chunks of a job that asked for one partial per chunk, or chunks not all running on `worker` (nor
// settled already: a late duplicate is ignored, not refused).
std::string refused_result(const Job& job, WorkerId worker, wire::ResultBatch::Reader batch) {
  for (auto r : batch.getResults()) {
    const ChunkRange range{r.getChunk(), r.getChunks()};
    const bool inside = range.count > 0 && range.first < job.chunks() && range.count <= job.chunks() - range.first;
    if (range.count == 0)
      return fmt::format("a result for no chunks (from chunk {}) of job {}", range.first, job.id());
    if (range.count > 1 && job.chunk_partials())
      return fmt::format("a result for {} chunks of job {}, which asked for one per chunk", range.count, job.id());
    if (inside && (job.ranges().running_here(range, worker) ||
                   (range.count == 1 && job.verify.running_on(range.first) == worker) ||
                   job.ranges().all_settled(range)))
      continue;
    return range.count == 1
               ? fmt::format("result for chunk {} of job {} that was not assigned to this worker", range.first,
                             job.id())
               : fmt::format("result for chunks {} to {} of job {} that were not all assigned to this worker",
                             range.first, range.first + (range.count - 1), job.id());
  }
  return {};
}

}  // namespace

void Scheduler::on_submit(ClientRecord& client, wire::Submit::Reader submit) {
  JobSpec spec = from_wire(submit.getSpec());
  const double verify_fraction = submit.getVerifyFraction();
  Status st = validate(spec);
  if (st) st = validate_verify_fraction(verify_fraction);
  if (!st) {
    send_message(*client.conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(0);
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
      f.setMessage(st.message());
    });
    job_refusals_.warn(fmt::format("client {} '{}': refused a job of {} chunks: {}", client.id,
                                   client.name, chunks, st.message()));
    return;
  }
  const JobId id = next_job_id_++;
  auto job = std::make_unique<Job>(id, client.id, std::make_shared<const JobSpec>(job_spec),
                                   submit.getWantPartials());
  job->verify = ChunkVerifier(verify_fraction, job_spec.seed);
  ++counters_.jobs_submitted;
  if (spdlog::should_log(spdlog::level::info))  // describe() is not free: tiny jobs notice
    spdlog::info("job {} from client '{}': {} ({} chunks)", id, client.name, describe(spec),
                 job->chunks());
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto a = m.initJobAccepted();
    a.setTag(submit.getTag());
    a.setJobId(id);
    a.setChunks(job->chunks());
  });
  client.jobs.insert(id);
  if (submit.getWantTimeline()) want_timeline_.insert(id);
  work_.update(*job);
  Job& accepted = *(jobs_[id] = std::move(job));
  if (workers_.empty()) send_progress(accepted, /*force=*/true);  // "no workers" at once
  dispatch();
}

void Scheduler::on_results(WorkerRecord& worker, wire::ResultBatch::Reader batch) {
  if (batch.hasReturned()) {  // the answer to a GiveBack
    on_given_back(worker, batch);
    return;
  }
  const JobId job_id = batch.getJobId();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    if (job_id == 0 || job_id >= next_job_id_) {
      protocol_error(*worker.conn, fmt::format("results for unknown job {}", job_id));
      return;
    }
    // The job finished, failed or was cancelled meanwhile: its late results are dropped (its
    // chunks left the worker's window when the job was forgotten).
    dispatch_to(worker);
    return;
  }
  Job& job = *it->second;
  const double busy = observe_busy(worker, job, batch);
  // All or nothing: a batch naming a chunk this worker does not hold is refused whole. Applying its
  // good results first would keep a liar's partials, and could leave a job with every chunk done
  // and no one to complete it.
  if (const std::string wrong = refused_result(job, worker.id, batch); !wrong.empty()) {
    protocol_error(*worker.conn, wrong);
    return;
  }
  // Verify copies queued by this batch are for other workers, so every window is topped up, not
  // only this worker's (which may not take them).
  const uint64_t copies_before = job.verify.queued();
  apply_partials(job, worker, batch, busy);
  bool requeued = job.verify.queued() > copies_before;
  if (const std::optional<bool> failed = apply_failures(job, worker, batch)) {
    requeued = requeued || *failed;
  } else {
    dispatch();  // the job failed and is gone
    return;
  }
  work_.update(job);
  if (job.complete()) {
    complete_job(job);
  } else {
    send_progress(job, /*force=*/false);
  }
  if (requeued) {
    dispatch();
  } else {
    dispatch_to(worker);
  }
}

double Scheduler::observe_busy(WorkerRecord& worker, const Job& job, wire::ResultBatch::Reader batch) {
  // A worker's own figure: NaN, infinite or negative would poison the counters for good.
  const double busy = std::isfinite(batch.getBusySeconds()) && batch.getBusySeconds() >= 0
                          ? batch.getBusySeconds()
                          : 0.0;
  worker.busy_seconds += busy;
  // Chunks, not partials: a partial covers a run of them.
  uint64_t reported = batch.getFailures().size();
  for (auto r : batch.getResults()) reported += r.getChunks();
  if (reported > 0) counters_.chunk_seconds.observe(busy / double(reported), reported);
  worker.observe_speed(busy, reported * job.spec()->chunk_rows * job.spec()->chunk_cols);
  return busy;
}

void Scheduler::apply_partials(Job& job, WorkerRecord& worker, wire::ResultBatch::Reader batch, double busy) {
  uint64_t finished = 0, first_chunk = UINT64_MAX;
  for (auto r : batch.getResults()) {
    const ChunkRange range{r.getChunk(), r.getChunks()};
    const uint64_t chunk = range.first;
    // The common case: the range's exact terms go straight into the job's total.
    if (!job.chunk_partials()) {
      const auto exact = r.getExact();
      const ChunkFigures figures{r.getSum(), r.getCount(), r.getMin(), r.getMax()};
      if (job.finish_adding(range, worker.id, figures, exact.getTerms().size(),
                            [&](ExactSum& total) { add_from_wire(exact, total); })) {
        finished += range.count;
        first_chunk = std::min<uint64_t>(first_chunk, chunk);
      }
      continue;  // else a late duplicate
    }
    const PartialSum partial = from_wire(r);
    // A drawn chunk's first copy waits for another; a running verify copy settles it.
    if (job.verify.drawn(chunk) && job.hold_for_verify(chunk, worker.id)) {
      job.verify.first_copy(chunk, copy_of(worker, partial));
    } else if (!job.finish(chunk, worker.id, partial)) {
      if (job.verify.running_on(chunk) != worker.id) continue;
      on_verify_copy(job, worker, chunk, partial);
    }
    ++finished;
    first_chunk = std::min<uint64_t>(first_chunk, chunk);
  }
  observe_results(worker, job, finished, first_chunk, busy);
  const uint64_t elements = finished * job.spec()->chunk_rows * job.spec()->chunk_cols;
  const uint64_t bytes = finished * job.spec()->chunk_bytes();
  worker.in_flight.remove(job.id(), finished);
  worker.chunks_done += finished;
  worker.elements_done += elements;
  worker.bytes_reduced += bytes;
  counters_.tasks_done += finished;
  counters_.bytes_reduced += bytes;
}

std::optional<bool> Scheduler::apply_failures(Job& job, WorkerRecord& worker, wire::ResultBatch::Reader batch) {
  bool requeued = false;
  for (auto f : batch.getFailures()) {
    const uint64_t chunk = f.getChunk();
    if (chunk >= job.chunks()) continue;
    const bool copy = job.verify.running_on(chunk) == worker.id;
    if (!copy && !job.ranges().running_here(ChunkRange{chunk, 1}, worker.id)) continue;
    worker.in_flight.remove(job.id(), 1);
    ++counters_.tasks_failed;
    const std::string message = printable(f.getMessage().cStr(), 1000);
    spdlog::warn("job {} chunk {} {}failed on worker '{}': {}", job.id(), chunk, copy ? "(verify copy) " : "",
                 worker.name, message);
    const uint32_t failures = copy ? job.verify.requeue(chunk, worker.id, worker.name, /*blame=*/true)
                                   : job.requeue(chunk, worker.id, worker.name, /*blame=*/true);
    ++counters_.tasks_requeued;
    requeued = true;
    if (failures >= config_.allowed_failures) {
      fail_job(job, fmt::format("chunk {} failed {} times (on {}); last error: {}", chunk, failures,
                                fmt::join(failed_on(job, chunk, copy), ", "), message));
      return std::nullopt;
    }
  }
  return requeued;
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
    capnp::MallocMessageBuilder m(256 + n * 6);
    auto p = m.initRoot<wire::Message>().initProgress();
    p.setJobId(job.id());
    p.setChunksDone(job.done());
    p.setChunksTotal(job.chunks());
    p.setRunningSum(job.running_sum());
    p.setNoWorkers(workers_.empty());
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
}

void Scheduler::complete_job(Job& job) {
  send_progress(job, /*force=*/true);
  const PartialSum total = job.result();
  ++counters_.jobs_completed;
  spdlog::info("job {} done: {} in {:.3f} s on {}, sum {:.17g}, count {}", job.id(), counted(job.chunks(), "chunk"),
               job.seconds(), counted(job.workers_used(), "worker"), total.sum, total.count);
  if (job.verify.on())
    spdlog::info("job {} verify: {} compared, {}", job.id(), counted(job.verify.verified(), "chunk"),
                 counted(job.verify.mismatch_count(), "mismatch", "mismatches"));
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
      write_verify_report(job, r);
      report_devices(job, r);
    });
  }
  remember_job(job, "done", "");
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
  spdlog::info("job {} cancelled ({} of {} chunks done)", id, it->second->done(),
               it->second->chunks());
  remember_job(*it->second, "cancelled", "cancelled by its client, or its client left");
  forget_job(*it->second);
  dispatch();
}

void Scheduler::forget_job(Job& job) {
  const JobId id = job.id();
  capnp::MallocMessageBuilder m(32);
  m.initRoot<wire::Message>().initDropJob().setJobId(id);
  // Only the workers the job was defined on can hold its chunks (10,000 finished jobs times 1024
  // workers made this loop psched's largest cost).
  if (auto dit = defined_on_.find(id); dit != defined_on_.end()) {
    for (const WorkerId wid : dit->second) {
      auto wit = workers_.find(wid);
      if (wit == workers_.end()) continue;  // left since
      WorkerRecord& w = *wit->second;
      if (w.defined_jobs.erase(id)) w.conn->send(m);
      // The worker forgets the job's queued chunks; the running ones report and are dropped.
      w.in_flight.forget_job(id);
    }
    defined_on_.erase(dit);
  }
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    cit->second->jobs.erase(id);
  }
  work_.forget(id);
  job_devices_.finish(id);
  want_timeline_.erase(id);
  jobs_.erase(id);  // destroys `job`
}

void Scheduler::remember_job(const Job& job, const char* state, const std::string& message) {
  JobSummary s;
  s.id = job.id();
  auto cit = clients_.find(job.client());
  s.client = cit != clients_.end() ? cit->second->name : fmt::format("client {}", job.client());
  s.description = describe(*job.spec());
  s.state = state;
  s.message = message.substr(0, 1000);
  s.chunks = job.chunks();
  s.chunks_done = job.done();
  s.bytes = job.spec()->bytes();
  s.retries = job.retries();
  s.workers = uint32_t(job.workers_used());
  s.seconds = job.seconds();
  if (job.complete()) {
    const PartialSum total = job.result();
    s.sum = total.sum;
    s.count = total.count;
  } else {
    s.sum = job.running_sum();
  }
  recent_jobs_.push_front(std::move(s));
  if (recent_jobs_.size() > kRecentJobs) recent_jobs_.pop_back();
}

void Scheduler::remove_worker(WorkerId id, const std::string& why, bool graceful) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  std::unique_ptr<WorkerRecord> w = std::move(it->second);
  workers_.erase(it);
  spdlog::info("worker {} '{}' {}: {} ({} in flight re-queued)", id, w->name, graceful ? "left" : "lost", why,
               counted(w->in_flight.size(), "chunk"));
  std::vector<std::pair<JobId, std::string>> to_fail;
  for (const auto& [job_id, held] : w->in_flight.by_job()) {
    auto jit = jobs_.find(job_id);
    if (jit == jobs_.end()) continue;
    if (auto failure = requeue_lost(*jit->second, *w, why, graceful)) to_fail.emplace_back(job_id, *failure);
  }
  for (auto& [job_id, message] : to_fail) {
    auto jit = jobs_.find(job_id);
    if (jit != jobs_.end()) fail_job(*jit->second, message);
  }
  if (shutting_down_) return;
  if (workers_.empty()) tell_clients_about_workers();
  dispatch();
}

// Every chunk a dead (or cut-off) worker held is blamed (as ranges): one of them may have killed
// it. Chunks lost a second time beside others go back as a suspect range, to run alone
// (dispatch.cpp, Job::take_suspect) chunk by chunk: innocent neighbours complete, and only the
// chunk that crashes workers keeps collecting failures, so the failure names it (a crash on chunk
// 7 is reported as chunk 7, with the workers it took down), or, if no worker was free to run them
// apart, every range that reached the limit. A suspect range too long to run chunk by chunk (a
// GPU's deep window) runs whole, and is halved each time it takes its worker down alone. A first
// loss re-queues as usual: one killed worker's window must not run apart.
std::optional<std::string> Scheduler::requeue_lost(Job& job, const WorkerRecord& w, const std::string& why,
                                                   bool graceful) {
  const bool alone = w.isolating || w.in_flight.size() == 1;
  std::vector<ChunkRange> at_limit;
  const uint32_t limit = graceful ? UINT32_MAX : config_.allowed_failures;
  for (const ChunkRange& r : job.running_ranges_of(w.id)) {
    counters_.tasks_requeued += r.count;
    // A long suspect range that took its worker down alone: halved (Job::kSuspectsOneByOne).
    if (!graceful && w.isolating && job.requeue_halves(r, w.id, w.name)) continue;
    job.requeue(r, w.id, w.name, /*blame=*/!graceful, /*repeat_as_suspect=*/!alone, limit, &at_limit);
  }
  const size_t ranges_at_limit = at_limit.size();
  for (const uint64_t chunk : job.verify.running_chunks_of(w.id)) {
    const uint32_t failures = job.verify.requeue(chunk, w.id, w.name, /*blame=*/!graceful);
    ++counters_.tasks_requeued;
    if (failures >= limit) at_limit.push_back(ChunkRange{chunk, 1});
  }
  work_.update(job);
  const bool copy_at_limit = ranges_at_limit == 0 && !at_limit.empty();
  if (at_limit.empty()) return std::nullopt;
  const uint64_t chunk = at_limit.front().first;
  const size_t taken_down = copy_at_limit ? job.verify.failed_on(chunk).size() : job.failed_on(chunk).size();
  const auto workers = failed_on(job, chunk, copy_at_limit);  // each name once
  if (at_limit.size() == 1 && at_limit.front().count == 1)
    return fmt::format("chunk {}{} took down {} ({}); the last one was lost: {}", chunk,
                       copy_at_limit ? " (verify copy)" : "", counted(taken_down, "worker"),
                       fmt::join(workers, ", "), why);
  std::vector<std::string> named;
  for (const ChunkRange& r : at_limit)
    named.push_back(r.count == 1 ? fmt::format("{}", r.first)
                                 : fmt::format("{} to {}", r.first, r.first + (r.count - 1)));
  return fmt::format("chunks {} took down {} ({}), always together (no worker was free to run "
                     "them apart): one of them crashes workers; the last one was lost: {}",
                     fmt::join(named, ", "), counted(taken_down, "worker"), fmt::join(workers, ", "), why);
}

void Scheduler::tell_clients_about_workers() {
  if (workers_.empty() && !jobs_.empty())
    spdlog::warn("no workers: {} job{} wait{} for one to join", jobs_.size(),
                 jobs_.size() == 1 ? "" : "s", jobs_.size() == 1 ? "s" : "");
  for (auto& [id, job] : jobs_) send_progress(*job, /*force=*/true);
}

}  // namespace psched
