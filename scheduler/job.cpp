#include "scheduler/job.h"

#include "common/check.h"

namespace psched {

Job::Job(JobId id, ClientId client, std::shared_ptr<const JobSpec> spec, bool want_partials)
    : id_(id),
      client_(client),
      spec_(std::move(spec)),
      want_partials_(want_partials),
      started_(std::chrono::steady_clock::now()) {
  const uint64_t n = spec_->chunks();
  states_.assign(n, uint8_t(TaskState::kQueued));
  running_on_.assign(n, 0);
}

PartialSum Job::result() const {
  PartialSum r = total_;
  r.sum = total_.exact.rounded();
  return r;
}

double Job::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

// The one place a chunk changes state. Legal moves: queued->running, running->done,
// running->queued, running->verifying->done.
void Job::transition(uint64_t chunk, TaskState to, WorkerId worker) {
  const TaskState from = TaskState(states_[chunk]);
  switch (to) {
    case TaskState::kRunning:
      PSCHED_ASSERT(from == TaskState::kQueued, chunk, int(from), worker);
      running_on_[chunk] = worker;
      break;
    case TaskState::kVerifying:
      PSCHED_ASSERT(from == TaskState::kRunning, chunk, int(from), worker);
      break;
    case TaskState::kDone:
      PSCHED_ASSERT(from == TaskState::kRunning || from == TaskState::kVerifying, chunk, int(from),
                    worker);
      ++done_;
      workers_used_[worker] = true;
      break;
    case TaskState::kQueued:
      PSCHED_ASSERT(from == TaskState::kRunning, chunk, int(from), worker);
      requeued_.push_back(chunk);
      ++retries_;
      break;
  }
  states_[chunk] = uint8_t(to);
}

uint64_t Job::take(WorkerId worker) {
  PSCHED_REQUIRE(has_ordinary(), id_);
  uint64_t chunk;
  if (!requeued_.empty()) {
    chunk = requeued_.front();
    requeued_.pop_front();
  } else {
    chunk = next_fresh_++;
  }
  transition(chunk, TaskState::kRunning, worker);
  return chunk;
}

uint64_t Job::take_suspect(WorkerId worker) {
  PSCHED_REQUIRE(has_suspects(), id_);
  const uint64_t chunk = suspects_.front();
  suspects_.pop_front();
  transition(chunk, TaskState::kRunning, worker);
  return chunk;
}

uint64_t Job::take_run(WorkerId worker, uint64_t max, uint64_t& first) {
  PSCHED_REQUIRE(has_ordinary() && max > 0, id_, max);
  if (!requeued_.empty()) {
    first = take(worker);
    return 1;
  }
  first = next_fresh_;
  const uint64_t left = states_.size() - next_fresh_;
  const uint64_t n = left < max ? left : max;
  next_fresh_ += n;
  for (uint64_t c = first; c < first + n; ++c) transition(c, TaskState::kRunning, worker);
  return n;
}

std::vector<uint64_t> Job::running_chunks_of(WorkerId worker) const {
  std::vector<uint64_t> out;
  for (uint64_t c = 0; c < states_.size(); ++c)
    if (TaskState(states_[c]) == TaskState::kRunning && running_on_[c] == worker) out.push_back(c);
  return out;
}

bool Job::finish(uint64_t chunk, WorkerId worker, const PartialSum& partial) {
  if (!running_here(chunk, worker)) return false;
  record(chunk, worker, partial);
  return true;
}

void Job::make_room(uint64_t adds) {
  if (adds_since_normalize_ + adds > kAddsBeforeNormalize) {
    total_.exact.normalize();
    adds_since_normalize_ = 0;
  }
  adds_since_normalize_ += adds;
}

// Running or verifying chunk is done with `partial`: the one place a chunk's partial joins the job.
void Job::record(uint64_t chunk, WorkerId worker, const PartialSum& partial) {
  // A partial off the wire is not normalised: a frame holds at most 2^21 terms, so its digits are
  // below 2^53 in magnitude, what 2^21 adds could leave; its merge is charged as many.
  make_room(uint64_t{1} << 21);
  total_.exact.add(partial.exact);
  record_figures(chunk, worker, ChunkFigures{partial.sum, partial.count, partial.min, partial.max});
  if (want_partials_) unsent_partials.emplace_back(chunk, partial);
}

void Job::record_figures(uint64_t chunk, WorkerId worker, const ChunkFigures& f) {
  total_.count += f.count;
  total_.min = f.min < total_.min ? f.min : total_.min;
  total_.max = f.max > total_.max ? f.max : total_.max;
  running_sum_ += f.sum;
  transition(chunk, TaskState::kDone, worker);
}

bool Job::hold_for_verify(uint64_t chunk, WorkerId worker) {
  if (!running_here(chunk, worker)) return false;
  transition(chunk, TaskState::kVerifying, worker);
  return true;
}

void Job::finish_verified(uint64_t chunk, WorkerId worker, const PartialSum& partial) {
  PSCHED_REQUIRE(chunk < states_.size() && TaskState(states_[chunk]) == TaskState::kVerifying, chunk);
  record(chunk, worker, partial);
}

uint32_t Job::requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name,
                      bool blame, bool suspect) {
  if (!running_here(chunk, worker)) return 0;
  transition(chunk, TaskState::kQueued, worker);
  if (suspect) {
    requeued_.pop_back();  // transition() queued it with the ordinary chunks
    suspects_.push_back(chunk);
  }
  if (!blame) return uint32_t(failed_on(chunk).size());
  auto& names = failures_[chunk];
  names.push_back(worker_name);
  return uint32_t(names.size());
}

const std::vector<std::string>& Job::failed_on(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  auto it = failures_.find(chunk);
  return it == failures_.end() ? kNone : it->second;
}

}  // namespace psched
