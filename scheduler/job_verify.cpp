// Verify in the scheduler: a drawn block's copies travel to workers like any range (top_up.cpp
// takes them first), come back in ResultBatches (results.cpp hands them here), and are settled
// by the job's BlockVerifier (verify.h); suspects are logged and counted per worker for /metrics and
// the dashboard, and the job's JobResult lists the mismatches.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "core/plural.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

bool Scheduler::worker_outside(const std::vector<WorkerId>& excluded) const {
  for (const auto& [id, w] : workers_)
    if (w->conn->is_open() && std::find(excluded.begin(), excluded.end(), id) == excluded.end())
      return true;
  return false;
}

bool Scheduler::Peers::someone_else(const std::vector<WorkerId>& excluded) const {
  return scheduler.worker_outside(excluded);
}

bool Scheduler::Peers::connected(WorkerId worker) const {
  auto it = scheduler.workers_.find(worker);
  return it != scheduler.workers_.end() && it->second->conn->is_open();
}

bool Scheduler::Peers::someone_not_named(const std::vector<std::string>& names) const {
  for (const auto& [id, w] : scheduler.workers_)
    if (w->conn->is_open() && !w->stalled && std::find(names.begin(), names.end(), w->name) == names.end())
      return true;
  return false;
}

VerifyCopy Scheduler::copy_of(const WorkerRecord& worker, const PartialSum& partial) const {
  VerifyCopy c;
  c.worker = worker.id;
  c.worker_name = worker.name;
  c.device_name = worker.device_name;
  c.partial = partial;
  return c;
}

void Scheduler::on_verify_piece(Job& job, WorkerRecord& worker, ChunkRange range, const PartialSum& partial) {
  if (auto settled = job.verify.piece_done(range, copy_of(worker, partial), peers_))
    settle_block(job, *settled);
}

uint32_t Scheduler::on_verify_failure(Job& job, WorkerRecord& worker, uint64_t chunk) {
  std::optional<VerifySettled> settled;
  const uint32_t failures = job.verify.chunk_failed(chunk, worker.id, worker.name, peers_, settled);
  if (settled) settle_block(job, *settled);
  return failures;
}

void Scheduler::settle_block(Job& job, const VerifySettled& settled) {
  counters_.verify_chunks += settled.block.count;
  if (const VerifyMismatch* mismatch = settled.mismatch) {
    std::string copies;
    for (const VerifyCopy& c : mismatch->copies) {
      if (c.suspect) ++counters_.verify_mismatches[c.worker_name];
      const std::string differs = difference_from(c.partial, mismatch->copies.front().partial);
      copies += fmt::format("{}'{}' ({}) sum {:.17g}{}{}", copies.empty() ? "" : ", ", c.worker_name,
                            c.device_name, c.partial.sum, differs.empty() ? "" : " (" + differs + ")",
                            c.suspect ? " [suspect]" : "");
    }
    const ChunkRange r = mismatch->chunks;
    const std::string why = verify_search_note(mismatch->search);
    spdlog::error("job {} {}: verify mismatch: {}{}", job.id(), chunks_text(r.first, r.count), copies,
                  why.empty() ? "" : " (" + why + ")");
  }
  job.finish_verified(settled.block, settled.credit, settled.keep);
}

std::optional<std::string> Scheduler::verify_worker_gone(Job& job, const WorkerRecord& w, const std::string& why,
                                                         Loss loss) {
  std::vector<ChunkRange> at_limit;
  std::vector<VerifySettled> settled;
  const bool blame = loss == Loss::kLost;
  const uint32_t limit = blame ? config_.allowed_failures : UINT32_MAX;
  // Held to the limit only when the copy was all the worker ran: a crash it shows.
  job.verify.worker_gone(w.id, w.name, blame, blame && w.ran_alone(), limit, peers_, at_limit, settled);
  for (const VerifySettled& s : settled) settle_block(job, s);
  if (at_limit.empty()) return std::nullopt;
  const ChunkRange r = at_limit.front();
  const size_t lost = job.verify.failed_on(r.first).size();
  const std::string names = fmt::format("{}", fmt::join(job.failure_names(r.first, /*copy=*/true), ", "));
  if (job.verify.failures(r.first) >= limit)
    return fmt::format("the verify copy of {} failed or took down a worker running it alone {} times (on {}); "
                       "the last one was lost: {}", chunks_text(r.first, r.count), limit, names, why);
  return fmt::format("the verify copy of {} was lost with {} ({}), each running other work too: psched stops "
                     "retrying it; the last one was lost: {}", chunks_text(r.first, r.count), counted(lost, "worker"),
                     names, why);
}

void Scheduler::write_verify_report(const Job& job, wire::JobResult::Builder out) const {
  const BlockVerifier& v = job.verify;
  out.setVerifiedChunks(v.verified());
  out.setSameWorkerChunks(v.same_worker());
  out.setMismatchCount(v.mismatch_count());
  auto list = out.initMismatches(uint32_t(v.mismatches().size()));
  for (uint32_t i = 0; i < list.size(); ++i) {
    const VerifyMismatch& m = v.mismatches()[i];
    list[i].setChunk(m.chunks.first);
    list[i].setChunks(m.chunks.count);
    list[i].setNote(verify_search_note(m.search));
    auto copies = list[i].initCopies(uint32_t(m.copies.size()));
    for (uint32_t k = 0; k < copies.size(); ++k) {
      const VerifyCopy& c = m.copies[k];
      copies[k].setWorkerId(c.worker);
      copies[k].setWorkerName(c.worker_name);
      copies[k].setDeviceName(c.device_name);
      copies[k].setSum(c.partial.sum);
      copies[k].setCount(c.partial.count);
      copies[k].setMin(c.partial.min);
      copies[k].setMax(c.partial.max);
      copies[k].setSuspect(c.suspect);
      to_wire(c.partial.exact, copies[k].initExact());
      if (c.partial.has_squares) to_wire(c.partial.squares, copies[k].initSquares());
    }
  }
}

}  // namespace psched
