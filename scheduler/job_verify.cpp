// Verify in the scheduler: a drawn chunk's copies travel to workers like any chunk (dispatch.cpp
// takes them first), come back in ResultBatches (results.cpp hands them here), and are settled
// by the job's ChunkVerifier (verify.h); suspects are logged and counted per worker for /metrics and
// the dashboard, and the job's JobResult lists the mismatches.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>

#include "scheduler/scheduler.h"

namespace psched {

bool Scheduler::worker_outside(const std::vector<WorkerId>& excluded) const {
  for (const auto& [id, w] : workers_)
    if (w->conn->is_open() && std::find(excluded.begin(), excluded.end(), id) == excluded.end())
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

void Scheduler::on_verify_copy(Job& job, WorkerRecord& worker, uint64_t chunk,
                               const PartialSum& partial) {
  const VerifyMismatch* mismatch = nullptr;
  const std::optional<PartialSum> keep =
      job.verify.copy_done(chunk, copy_of(worker, partial), someone_else(), &mismatch);
  if (!keep) {
    spdlog::warn("job {} chunk {}: copies differ; computing it on a third worker", job.id(), chunk);
    return;
  }
  ++counters_.verify_chunks;
  if (mismatch != nullptr) {
    std::string copies;
    for (const VerifyCopy& c : mismatch->copies) {
      if (c.suspect) ++counters_.verify_mismatches[c.worker_name];
      copies += fmt::format("{}'{}' ({}) sum {:.17g}{}", copies.empty() ? "" : ", ", c.worker_name,
                            c.device_name, c.partial.sum, c.suspect ? " [suspect]" : "");
    }
    spdlog::error("job {} chunk {}: verify mismatch: {}", job.id(), chunk, copies);
  }
  job.finish_verified(chunk, worker.id, *keep);
}

void Scheduler::write_verify_report(const Job& job, wire::JobResult::Builder out) const {
  const ChunkVerifier& v = job.verify;
  out.setVerifiedChunks(v.verified());
  out.setSameWorkerChunks(v.same_worker());
  out.setMismatchCount(v.mismatch_count());
  auto list = out.initMismatches(uint32_t(v.mismatches().size()));
  for (uint32_t i = 0; i < list.size(); ++i) {
    const VerifyMismatch& m = v.mismatches()[i];
    list[i].setChunk(m.chunk);
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
    }
  }
}

}  // namespace psched
