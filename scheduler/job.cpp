#include "scheduler/job.h"

#include "common/check.h"

namespace psched {

Job::Job(JobId id, ClientId client, std::shared_ptr<const JobSpec> spec, bool want_partials)
    : id_(id),
      client_(client),
      spec_(std::move(spec)),
      want_partials_(want_partials),
      started_(std::chrono::steady_clock::now()),
      table_(spec_->chunks()) {}

PartialSum Job::result() const {
  PartialSum r = total_;
  r.sum = total_.exact.rounded();
  return r;
}

double Job::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

uint64_t Job::take_run(WorkerId worker, uint64_t max, uint64_t& first) {
  PSCHED_REQUIRE(has_ordinary() && max > 0, id_, max);
  const ChunkRange r = table_.take(worker, max);
  first = r.first;
  return r.count;
}

bool Job::finish(ChunkRange r, WorkerId worker, const PartialSum& partial) {
  if (!table_.finish(r, worker)) return false;
  record(r, worker, partial);
  return true;
}

void Job::make_room(uint64_t adds) {
  if (adds_since_normalize_ + adds > kAddsBeforeNormalize) {
    total_.exact.normalize();
    adds_since_normalize_ = 0;
  }
  adds_since_normalize_ += adds;
}

// Chunks just done (they were running or held) with `partial`: the one place a partial joins the job.
void Job::record(ChunkRange r, WorkerId worker, const PartialSum& partial) {
  // A partial off the wire is not normalised: a frame holds at most 2^21 terms, so its digits are
  // below 2^53 in magnitude, what 2^21 adds could leave; its merge is charged as many.
  make_room(uint64_t{1} << 21);
  total_.exact.add(partial.exact);
  record_figures(r, worker, ChunkFigures{partial.sum, partial.count, partial.min, partial.max});
  if (want_partials_) unsent_partials.emplace_back(r.first, partial);
}

void Job::record_figures(ChunkRange r, WorkerId worker, const ChunkFigures& f) {
  total_.count += f.count;
  total_.min = f.min < total_.min ? f.min : total_.min;
  total_.max = f.max > total_.max ? f.max : total_.max;
  running_sum_ += f.sum;
  done_by_[worker] += r.count;
}

void Job::finish_verified(uint64_t chunk, WorkerId worker, const PartialSum& partial) {
  PSCHED_REQUIRE(chunk < chunks() && table_.state(chunk) == ChunkState::kHeld, chunk);
  table_.finish_held(chunk);
  record(ChunkRange{chunk, 1}, worker, partial);
}

bool Job::requeue(ChunkRange r, WorkerId worker, const std::string& worker_name, bool blame,
                  bool repeat_as_suspect, uint32_t limit, std::vector<uint64_t>* at_limit) {
  if (!table_.running_here(r, worker)) return false;
  if (!blame) {
    table_.requeue(r, worker, /*suspect=*/false);
    return true;
  }
  // Runs of chunks alike (failed before or not) go back together; then each is blamed.
  for (uint64_t at = r.first; at < r.end();) {
    const bool suspect = repeat_as_suspect && failures_.count(at) != 0;
    uint64_t end = at + 1;
    while (end < r.end() && (repeat_as_suspect && failures_.count(end) != 0) == suspect) ++end;
    table_.requeue(ChunkRange{at, end - at}, worker, suspect);
    at = end;
  }
  for (uint64_t c = r.first; c < r.end(); ++c) {
    auto& names = failures_[c];
    names.push_back(worker_name);
    if (at_limit != nullptr && names.size() >= limit) at_limit->push_back(c);
  }
  return true;
}

uint32_t Job::requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name, bool blame,
                      bool repeat_as_suspect) {
  if (!requeue(ChunkRange{chunk, 1}, worker, worker_name, blame, repeat_as_suspect)) return 0;
  return uint32_t(failed_on(chunk).size());
}

const std::vector<std::string>& Job::failed_on(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  auto it = failures_.find(chunk);
  return it == failures_.end() ? kNone : it->second;
}

}  // namespace psched
