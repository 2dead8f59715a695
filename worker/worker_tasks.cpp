// Worker's side of the work (worker.h): the jobs the scheduler defines and drops, the ranges of its
// TaskBatches fed to the backend (and given back when asked), and the backend's outcomes paced into
// ResultBatches (net/report_pacer.h). worker.cpp holds the link that carries them.
#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/plural.h"
#include "net/job_definition.h"
#include "net/wire_convert.h"
#include "worker/result_batches.h"
#include "worker/worker.h"

namespace psched {

namespace asio = boost::asio;

void Worker::on_define_job(wire::DefineJob::Reader d) {
  JobDefinition def = read_job_definition(d);
  if (jobs_.count(def.job_id)) return;  // defined already
  if (!def.spec) spdlog::error("job {}: invalid spec from scheduler: {}", def.job_id, def.status.message());
  JobEntry entry;
  entry.local_key = next_local_key_++;
  entry.partial_block = def.partial_block;
  entry.spec = std::move(def.spec);
  job_of_key_[entry.local_key] = def.job_id;
  jobs_[def.job_id] = std::move(entry);
}

void Worker::on_drop_job(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) {
    backend_->drop_job(it->second.local_key);
    job_of_key_.erase(it->second.local_key);
    jobs_.erase(it);
  }
  unsent_outcomes_.erase(job_id);
  if (auto held = held_by_job_.find(job_id); held != held_by_job_.end()) {
    pacer_.released(held->second);  // its later outcomes are dropped unseen
    held_by_job_.erase(held);
  }
}

void Worker::on_task_batch(wire::TaskBatch::Reader batch) {
  const uint64_t job_id = batch.getJobId();
  pacer_.on_task_batch(batch.getReportIntervalUs(), batch.getQueueEmpty());
  // Work after idle (nothing held, nothing waiting to be reported): energy is measured from now.
  if (gpu_ && held_by_job_.empty() && unsent_outcomes_.empty()) energy_.start(gpu_->energy_joules());
  auto it = jobs_.find(job_id);
  const std::shared_ptr<const JobSpec> spec = it == jobs_.end() ? nullptr : it->second.spec;
  const uint64_t local_key = it == jobs_.end() ? 0 : it->second.local_key;
  const uint64_t chunks =
      spec ? spec->chunks() : 0;
  for (auto range : batch.getRanges()) {
    const uint64_t first = range.getFirst();
    const uint64_t count = range.getCount();
    // The common case, a valid run with no test fault in it: the backend takes it whole.
    if (spec && first < chunks && count <= chunks - first &&
        (config_.crash_on_chunk < 0 || uint64_t(config_.crash_on_chunk) < first ||
         uint64_t(config_.crash_on_chunk) - first >= count)) {
      assign(job_id, count);
      backend_->enqueue_run(local_key, first, count, spec);
      continue;
    }
    for (uint64_t k = 0; k < count; ++k) {
      const uint64_t chunk = first + k;
      if (!spec || chunk >= chunks) {
        ChunkOutcome bad;
        bad.job_id = job_id;
        bad.chunk = chunk;
        bad.ok = false;
        bad.error = spec ? fmt::format("chunk {} is outside the job's {}", chunk, counted(chunks, "chunk"))
                         : fmt::format("job {} was never defined or is invalid", job_id);
        assign(job_id, 1);
        add_pending(&bad, 1, std::chrono::steady_clock::now());
        if (!spec) continue;
        break;
      }
      if (config_.crash_on_chunk >= 0 && chunk == uint64_t(config_.crash_on_chunk)) {
        spdlog::critical("test fault switch: crashing on chunk {}", chunk);
        std::abort();
      }
      assign(job_id, 1);
      backend_->enqueue(ChunkTask{local_key, chunk, spec});
    }
  }
}

// The scheduler wants a job's tail for an idle worker: the backend gives back what it has not
// started of the range, and the answer goes at once (results waiting for the pacer stay).
void Worker::on_give_back(wire::GiveBack::Reader give_back) {
  const uint64_t job_id = give_back.getJobId();
  std::vector<ChunkRange> returned;
  if (auto it = jobs_.find(job_id); it != jobs_.end())
    returned = backend_->give_back(it->second.local_key, give_back.getFirst(), give_back.getCount());
  release(job_id, build_returned_batch(job_id, returned, [this](capnp::MessageBuilder& m) { conn()->send(m); }));
}

void Worker::release(uint64_t job_id, uint64_t chunks) {
  auto held = held_by_job_.find(job_id);
  if (held == held_by_job_.end()) return;
  const uint64_t n = std::min(chunks, held->second);
  pacer_.released(n);
  if ((held->second -= n) == 0) held_by_job_.erase(held);
}

void Worker::assign(uint64_t job_id, uint64_t chunks) {
  held_by_job_[job_id] += chunks;
  pacer_.assigned(chunks, std::chrono::steady_clock::now());
}

void Worker::drain_inbox() {
  {
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    draining_.swap(inbox_);
    inbox_posted_ = false;
  }
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < draining_.size();) {
    size_t end = i + 1;
    if (!draining_[i].device_lost)
      while (end < draining_.size() && draining_[end].job_id == draining_[i].job_id && !draining_[end].device_lost)
        ++end;
    on_outcomes(&draining_[i], end - i, now);
    i = end;
  }
  draining_.clear();  // keeps its capacity for the next swap
}

namespace {

// For the test-only flip switches: x with its last bit flipped, and a value as exact terms.
double last_bit_flipped(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  bits ^= 1;
  std::memcpy(&x, &bits, sizeof bits);
  return x;
}

ExactTerms one_term(double x) {
  ExactSum sum;
  sum.add(x);
  return ExactTerms(sum);
}

}  // namespace

void Worker::on_outcomes(ChunkOutcome* outcomes, size_t n, std::chrono::steady_clock::time_point now) {
  if (link_ == Link::kLeaving) return;
  if (outcomes[0].device_lost) {
    lose_device(std::move(outcomes[0]));
    return;
  }
  auto it = job_of_key_.find(outcomes[0].job_id);
  if (it == job_of_key_.end()) return;  // dropped job, or one of an earlier connection
  for (size_t i = 0; i < n; ++i) {
    outcomes[i].job_id = it->second;
    misbehave(outcomes[i]);
  }
  add_pending(outcomes, n, now);
}

// The test-only switches: a worker that computes wrong, or lies.
void Worker::misbehave(ChunkOutcome& outcome) const {
  if (outcome.ok && config_.flip_chunk >= 0 && outcome.chunk == uint64_t(config_.flip_chunk)) {
    // As a GPU that computes wrong would: the chunk's value itself (its exact sum, which the
    // scheduler merges and rounds) becomes the sum with its last bit flipped.
    outcome.partial.sum = last_bit_flipped(outcome.partial.sum);
    outcome.partial.exact = one_term(outcome.partial.sum);
  }
  if (outcome.ok && outcome.partial.has_squares && config_.flip_squares_chunk >= 0 &&
      outcome.chunk == uint64_t(config_.flip_squares_chunk)) {
    // A GPU wrong in the squares alone: their total with its last bit flipped, as one term.
    outcome.partial.squares = one_term(last_bit_flipped(outcome.partial.squares.rounded()));
  }
  // As a lying peer would: a count the chunk's geometry rules out (psched throws us off for it).
  if (outcome.ok && config_.lie_from_chunk >= 0 && outcome.chunk >= uint64_t(config_.lie_from_chunk))
    ++outcome.partial.count;
}

// The device's context is gone for good: report the chunk that failed, then leave (the scheduler
// re-queues what we held) and exit non-zero, so that our supervisor starts a worker with a fresh
// context.
void Worker::lose_device(ChunkOutcome outcome) {
  const std::string error = outcome.error;
  if (auto it = job_of_key_.find(outcome.job_id); it != job_of_key_.end()) {
    outcome.job_id = it->second;
    add_pending(&outcome, 1, std::chrono::steady_clock::now());
    flush_results();
  }
  exit_code_ = kExitDeviceLost;
  spdlog::error("device lost: {}; leaving so that a fresh worker can take over", error);
  leave("device lost: " + error, [this] { io_.stop(); });
}

void Worker::add_pending(ChunkOutcome* outcomes, size_t n, std::chrono::steady_clock::time_point now) {
  if (!scheduler_.open_conn() || n == 0) return;
  const uint64_t job_id = outcomes[0].job_id;
  uint64_t chunks = 0;
  for (size_t i = 0; i < n; ++i) chunks += outcomes[i].chunks;
  release(job_id, chunks);
  auto [it, added] = unsent_outcomes_.try_emplace(job_id);
  if (added) it->second.swap(spare_outcomes_);
  it->second.insert(it->second.end(), std::make_move_iterator(outcomes), std::make_move_iterator(outcomes + n));
  if (flush_posted_) return;
  if (pacer_.due(now)) {
    flush_posted_ = true;
    asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_)] {
      if (alive.lock()) flush_results();
    });
  } else {
    arm_report_timer();
  }
}

void Worker::arm_report_timer() {
  if (report_timer_armed_) return;
  report_timer_armed_ = true;
  report_timer_.expires_at(pacer_.deadline());
  report_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_)](const boost::system::error_code& ec) {
    if (!alive.lock()) return;
    report_timer_armed_ = false;
    if (ec || flush_posted_ || unsent_outcomes_.empty()) return;
    if (pacer_.due(std::chrono::steady_clock::now())) {
      flush_results();
    } else {
      arm_report_timer();  // a report went out meanwhile: the interval started again
    }
  });
}

void Worker::flush_results() {
  flush_posted_ = false;
  pacer_.reported(std::chrono::steady_clock::now());
  if (!scheduler_.open_conn()) {
    unsent_outcomes_.clear();
    return;
  }
  double joules_per_busy_second = 0;
  if (gpu_) {
    double busy = 0;
    for (const auto& [job_id, outcomes] : unsent_outcomes_)
      for (const ChunkOutcome& o : outcomes) busy += o.busy_seconds;
    joules_per_busy_second = energy_.charge(gpu_->energy_joules(), busy, gpu_->recent_watts());
  }
  for (auto& [job_id, outcomes] : unsent_outcomes_) {
    if (outcomes.empty()) continue;
    auto job = jobs_.find(job_id);
    const uint64_t partial_block = job != jobs_.end() ? job->second.partial_block : 1;
    build_result_batches(job_id, outcomes, config_.scheduler_max_frame_bytes, partial_block,
                         [this](capnp::MessageBuilder& m) { conn()->send(m); }, joules_per_busy_second);
    outcomes.clear();
    if (outcomes.capacity() > spare_outcomes_.capacity()) outcomes.swap(spare_outcomes_);
  }
  unsent_outcomes_.clear();
}

}  // namespace psched
