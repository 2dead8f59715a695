// A ResultBatch folded into its job: checked whole first (refused_result), then its partials (the
// common case: a run's exact terms straight into the job's total; a verify job's block by block,
// through its BlockVerifier) and its failures (re-queued, blamed, the job failed at the limit).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "app/logging.h"
#include "core/plural.h"
#include "net/wire_convert.h"
#include "scheduler/partial_check.h"
#include "scheduler/scheduler.h"

namespace psched {

namespace {

ReportedPartial reported_partial(ChunkRange range, wire::ChunkPartial::Reader r) {
  const auto exact = r.getExact();
  ReportedPartial p;
  p.range = range;
  p.sum = r.getSum();
  p.count = r.getCount();
  p.min = r.getMin();
  p.max = r.getMax();
  p.nan = exact.getNan();
  p.pos_inf = exact.getPosInf();
  p.neg_inf = exact.getNegInf();
  note_terms(exact.getTerms(), p);
  if (r.hasSquares()) {
    const auto squares = r.getSquares();
    p.squares.present = true;
    p.squares.nan = squares.getNan();
    p.squares.pos_inf = squares.getPosInf();
    p.squares.neg_inf = squares.getNegInf();
    note_terms(squares.getTerms(), p.squares);
  }
  return p;
}

// A job's failure at --allowed-failures: the chunk, its failures and where, the last error.
std::string chunk_failed(const Job& job, uint64_t chunk, uint32_t failures, bool copy, const std::string& last) {
  return fmt::format("chunk {} failed {} times (on {}); last error: {}", chunk, failures,
                     fmt::join(job.failure_names(chunk, copy), ", "), last);
}

// Why a batch's results cannot be taken (`why` empty: they can): one names no chunks, cannot be the
// partial of its range (untrue_partial: a lying or broken worker; `untrue` is then that range),
// crosses a block of a job that asked for a partial per block (DefineJob.partialBlock), or chunks
// not all running on `worker` (nor settled already: a late duplicate is ignored, not refused; nor,
// from a worker that once stalled, re-queued meanwhile: late too, and skipped by apply_partials).
struct Refusal {
  std::string why;
  std::optional<ChunkRange> untrue;
};
Refusal refused_result(const Job& job, const WorkerRecord& worker, capnp::List<wire::ChunkPartial>::Reader results) {
  const uint64_t block = job.partial_block();
  for (auto r : results) {
    const ChunkRange range{r.getChunk(), r.getChunks()};
    const bool inside = range.count > 0 && range.first < job.chunks() && range.count <= job.chunks() - range.first;
    if (range.count == 0)
      return {fmt::format("a result for no chunks (from chunk {}) of job {}", range.first, job.id()), {}};
    if (inside && block > 0 && range.first / block != (range.end() - 1) / block)
      return {fmt::format("a result for {} of job {}, which asked for a partial per {}",
                          chunks_text(range.first, range.count), job.id(),
                          block == 1 ? "chunk" : fmt::format("{} chunks", block)),
              {}};
    if (inside) {
      const std::string untrue = untrue_partial(*job.spec(), reported_partial(range, r));
      if (!untrue.empty())
        return {fmt::format("result for {} of job {} cannot be true: {}", chunks_text(range.first, range.count),
                            job.id(), untrue),
                range};
    }
    if (inside && (worker.stalled_once || job.ranges().running_here(range, worker.id) ||
                   job.verify.running_here(range, worker.id) || job.ranges().all_settled(range)))
      continue;
    return {fmt::format("result for {} of job {} that {} assigned to this worker", chunks_text(range.first, range.count),
                        job.id(), range.count == 1 ? "was not" : "were not all"),
            {}};
  }
  return {};
}

}  // namespace

void Scheduler::on_results(WorkerRecord& worker, wire::ResultBatch::Reader batch) {
  if (batch.hasReturned()) {  // the answer to a GiveBack
    on_given_back(worker, batch);
    return;
  }
  const JobId job_id = batch.getJobId();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    if (job_id == 0 || job_id >= next_job_id_) {
      protocol_error(worker, fmt::format("results for unknown job {}", job_id));
      return;
    }
    // The job finished, failed or was cancelled meanwhile: its late results are dropped (its
    // chunks left the worker's window when the job was forgotten).
    worker.top_up_owed = true;
    return;
  }
  Job& job = *it->second;
  // The failures are read first, whole: one whose message is malformed throws (the connection
  // answers "malformed message" and closes) before anything is applied. Read as they were applied,
  // it left the worker's window counted down with the chunk still running on it (the scheduler
  // fuzzer's find), or a job whose results had just completed it never completed.
  std::vector<ReportedFailure> failures;
  failures.reserve(batch.getFailures().size());
  for (auto f : batch.getFailures())
    failures.push_back(ReportedFailure{f.getChunk(), printable(f.getMessage().cStr(), 1000)});
  progress_from(worker);
  // A worker's own figure: NaN, infinite or negative would poison the job's total.
  const double energy = batch.getEnergyJoules();
  const Reported reported{batch.getResults(), std::move(failures),
                          std::isfinite(energy) && energy > 0 ? energy : 0.0};
  const double busy = observe_busy(worker, job, reported, batch.getBusySeconds());
  // All or nothing: a batch naming a chunk this worker does not hold is refused whole. Applying its
  // good results first would keep a liar's partials, and could leave a job with every chunk done
  // and no one to complete it.
  if (const Refusal refusal = refused_result(job, worker, reported.results); !refusal.why.empty()) {
    // Its client hears who was thrown off and for which chunk (pbench --burn fails that GPU).
    if (job.notices.size() < Job::kMaxWorkerNotices)
      job.notices.push_back(fmt::format("worker {} '{}' thrown off: {}", worker.id, worker.name, refusal.why));
    const bool failed = refusal.untrue && blame_untrue(job, worker, *refusal.untrue, refusal.why);
    protocol_error(worker, refusal.why);
    if (failed) dispatch();  // the job is gone
    return;
  }
  const uint64_t copies_before = job.verify.queued();
  apply_partials(job, worker, reported, busy);
  const bool copies_queued = job.verify.queued() > copies_before;
  const std::optional<bool> requeued = apply_failures(job, worker, reported);
  if (!requeued) {
    dispatch();  // the job failed and is gone
    return;
  }
  dispatcher_.job_changed(job);
  if (job.complete()) {
    complete_job(job);
  } else {
    send_progress(job, /*force=*/job.unsent_partials.size() >= kMaxPartialsPerProgress);
  }
  worker.top_up_owed = true;  // once the burst of its reports is handled
  if (*requeued) {
    dispatch();  // re-queued chunks: every window may take them
  } else if (copies_queued) {
    // Verify copies are for other workers: the idle ones take them now, the busy ones with their
    // next top-up. (Topping up every window for each block cost 1024 workers a TaskBatch each.)
    wake_idle();
  }
}

double Scheduler::observe_busy(WorkerRecord& worker, const Job& job, const Reported& batch, double reported_busy) {
  // A worker's own figure: NaN, infinite or negative would poison the counters for good.
  const double busy = std::isfinite(reported_busy) && reported_busy >= 0 ? reported_busy : 0.0;
  worker.busy_seconds += busy;
  // Chunks, not partials: a partial covers a run of them.
  uint64_t reported = batch.failures.size();
  for (auto r : batch.results) reported += r.getChunks();
  if (reported > 0) counters_.chunk_seconds.observe(busy / double(reported), reported);
  dispatcher_.reported(worker, busy, reported, reported * job.spec()->chunk_elements());
  return busy;
}

void Scheduler::apply_partials(Job& job, WorkerRecord& worker, const Reported& batch, double busy) {
  uint64_t finished = 0, first_chunk = UINT64_MAX;
  for (auto r : batch.results) {
    const ChunkRange range{r.getChunk(), r.getChunks()};
    const uint64_t chunk = range.first;
    if (worker.stalled_once && !job.ranges().running_here(range, worker.id) &&
        !job.verify.running_here(range, worker.id))
      continue;  // re-queued when it stalled: late, whether done elsewhere yet or not
    // The common case: the range's exact terms go straight into the job's total.
    if (job.partial_block() == 0 && !job.spec()->squares) {
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
    // A drawn block's first copy waits for another; a running verify copy settles it.
    if (job.verify.drawn(chunk) && job.hold_for_verify(range, worker.id)) {
      job.verify.first_piece(range, copy_of(worker, partial));
    } else if (!job.finish(range, worker.id, partial)) {
      if (!job.verify.running_here(range, worker.id)) continue;  // a late duplicate
      on_verify_piece(job, worker, range, partial);
    }
    finished += range.count;
    first_chunk = std::min<uint64_t>(first_chunk, chunk);
  }
  observe_results(worker, job, finished, first_chunk, busy, batch.energy_joules);
  const uint64_t elements = finished * job.spec()->chunk_elements();
  const uint64_t bytes = finished * job.spec()->chunk_bytes();
  worker.in_flight.remove(job.id(), finished);
  worker.chunks_done += finished;
  worker.elements_done += elements;
  worker.bytes_reduced += bytes;
  counters_.tasks_done += finished;
  counters_.bytes_reduced += bytes;
}

// An untrue partial is its range's failure on this worker, as a failure it reports is: the range
// goes back blamed (a second time as a suspect range, run alone chunk by chunk), and a chunk at
// --allowed-failures fails the job. Thrown off unblamed, a worker whose every result is untrue (a
// broken device, a bad build) took its range back at each reconnection and held the job forever.
bool Scheduler::blame_untrue(Job& job, WorkerRecord& worker, ChunkRange range, const std::string& why) {
  std::vector<ChunkRange> at_limit;
  if (!job.requeue(range, worker.id, worker.name, /*blame=*/true, /*repeat_as_suspect=*/true,
                   config_.allowed_failures, &at_limit))
    return false;  // not running here (a verify copy, a stalled worker's late result): unblamed
  worker.in_flight.remove(job.id(), range.count);
  counters_.tasks_failed += range.count;
  counters_.tasks_requeued += range.count;
  dispatcher_.job_changed(job);
  if (at_limit.empty()) return false;
  const uint64_t chunk = at_limit.front().first;
  fail_job(job, chunk_failed(job, chunk, job.failures(chunk), /*copy=*/false, why));
  return true;
}

std::optional<bool> Scheduler::apply_failures(Job& job, WorkerRecord& worker, const Reported& batch) {
  bool requeued = false;
  for (const ReportedFailure& f : batch.failures) {
    const uint64_t chunk = f.chunk;
    if (chunk >= job.chunks()) continue;
    const bool copy = job.verify.running_here(ChunkRange{chunk, 1}, worker.id);
    if (!copy && !job.ranges().running_here(ChunkRange{chunk, 1}, worker.id)) continue;
    worker.in_flight.remove(job.id(), 1);
    ++counters_.tasks_failed;
    const std::string& message = f.message;
    spdlog::warn("job {} chunk {} {}failed on worker '{}': {}", job.id(), chunk, copy ? "(verify copy) " : "",
                 worker.name, message);
    const uint32_t failures = copy ? on_verify_failure(job, worker, chunk)
                                   : job.requeue(chunk, worker.id, worker.name, /*blame=*/true);
    ++counters_.tasks_requeued;
    requeued = true;
    if (failures >= config_.allowed_failures) {
      fail_job(job, chunk_failed(job, chunk, failures, copy, message));
      return std::nullopt;
    }
  }
  return requeued;
}

}  // namespace psched
