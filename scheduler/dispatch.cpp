// Dispatch: keep every worker's window of chunks in flight full. Workers announce their window in
// Hello; each time a worker returns results (or joins, or work arrives) it is topped up. Jobs take
// turns chunk by chunk, so concurrent jobs progress together. The job spec goes to a worker once
// (DefineJob); after that only chunk ranges travel, contiguous runs coalesced.
#include <capnp/message.h>

#include <vector>

#include "common/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

void Scheduler::dispatch() {
  if (jobs_.empty()) return;
  for (auto& [id, w] : workers_) dispatch_to(*w);
}

void Scheduler::dispatch_to(WorkerRecord& worker) {
  if (shutting_down_ || !worker.conn->is_open()) return;
  uint32_t free = worker.free_slots();
  if (free == 0 || jobs_.empty()) return;

  // Chunks picked per job, in the order taken.
  std::vector<std::pair<Job*, std::vector<uint64_t>>> picked;
  auto slot_for = [&](Job* job) -> std::vector<uint64_t>& {
    for (auto& [j, chunks] : picked)
      if (j == job) return chunks;
    picked.emplace_back(job, std::vector<uint64_t>{});
    return picked.back().second;
  };

  while (free > 0) {
    // The next job after the last one served that still has queued chunks.
    Job* next = nullptr;
    auto it = jobs_.upper_bound(round_robin_after_);
    for (size_t tried = 0; tried < jobs_.size(); ++tried, ++it) {
      if (it == jobs_.end()) it = jobs_.begin();
      if (it->second->has_queued()) {
        next = it->second.get();
        break;
      }
    }
    if (next == nullptr) break;
    round_robin_after_ = next->id();
    // Take a run from this job (up to the free slots divided among the jobs that have work).
    const uint32_t share = std::max<uint32_t>(1, free / uint32_t(jobs_.size()));
    auto& chunks = slot_for(next);
    for (uint32_t k = 0; k < share && free > 0 && next->has_queued(); ++k, --free) {
      const uint64_t chunk = next->take(worker.id);
      chunks.push_back(chunk);
      worker.in_flight.insert({next->id(), chunk});
      ++counters_.tasks_dispatched;
    }
  }

  for (auto& [job, chunks] : picked) {
    if (worker.defined_jobs.insert(job->id()).second) {
      send_message(*worker.conn, [&](wire::Message::Builder m) {
        auto d = m.initDefineJob();
        d.setJobId(job->id());
        to_wire(*job->spec(), d.initSpec());
      });
    }
    // Coalesce consecutive chunk numbers into ranges.
    std::vector<std::pair<uint64_t, uint32_t>> ranges;
    for (uint64_t c : chunks) {
      if (!ranges.empty() && ranges.back().first + ranges.back().second == c &&
          ranges.back().second < UINT32_MAX) {
        ++ranges.back().second;
      } else {
        ranges.emplace_back(c, 1);
      }
    }
    capnp::MallocMessageBuilder m(64 + ranges.size() * 4);
    auto batch = m.initRoot<wire::Message>().initTaskBatch();
    batch.setJobId(job->id());
    auto list = batch.initRanges(uint32_t(ranges.size()));
    for (size_t i = 0; i < ranges.size(); ++i) {
      list[uint32_t(i)].setFirst(ranges[i].first);
      list[uint32_t(i)].setCount(ranges[i].second);
    }
    worker.conn->send(m);
  }
}

}  // namespace psched
