#include "client/job_run.h"

#include <fmt/format.h>

#include "core/check.h"
#include "core/plural.h"

namespace pclient {

namespace wire = psched::wire;

namespace {

// An exact sum's terms as the wire carries them (non-overlapping doubles, largest first).
std::vector<double> terms_of(wire::ExactSum::Reader e) {
  std::vector<double> out;
  out.reserve(e.getTerms().size());
  for (double t : e.getTerms()) out.push_back(t);
  return out;
}

}  // namespace

JobRun::JobRun(uint64_t tag, const RunOptions& options, Send send, WatchWorkers watch_workers)
    : tag_(tag), options_(options), send_(std::move(send)), watch_workers_(std::move(watch_workers)) {}

void JobRun::to(State next) {
  const bool legal = next == State::kAccepted ? state_ == State::kSubmitted
                     : next == State::kFailed ? !finished()
                                              : state_ == State::kAccepted;  // done, cancelled
  PSCHED_ASSERT(legal, int(state_), int(next));
  state_ = next;
  if (finished() && waiting_for_workers_) {
    waiting_for_workers_ = false;
    watch_workers_(false);
  }
}

void JobRun::on_message(wire::Message::Reader m) {
  if (finished()) return;
  switch (m.which()) {
    case wire::Message::JOB_ACCEPTED:
      if (state_ != State::kSubmitted || m.getJobAccepted().getTag() != tag_) return;
      job_id_ = m.getJobAccepted().getJobId();
      to(State::kAccepted);
      if (cancel_wanted_) cancel();
      return;
    case wire::Message::JOB_FAILED: {
      auto f = m.getJobFailed();
      // Ours: our accepted job by its id, or our Submit refused before it had one, by its tag.
      const bool ours = f.getJobId() != 0 ? f.getJobId() == job_id_
                                          : state_ == State::kSubmitted && f.getTag() == tag_;
      if (!ours) return;
      failure_ = f.getMessage().cStr();
      to(State::kFailed);
      return;
    }
    case wire::Message::ERROR:
      if (m.getError().getJobId() != 0 && m.getError().getJobId() != job_id_) return;  // about another job
      // Job 0: about the connection, which psched closes next (a client cut off as a slow reader
      // learns why here, not from a reset): said as psched's, not the job's.
      failure_ = m.getError().getJobId() == 0 ? fmt::format("psched: {}", m.getError().getMessage().cStr())
                                              : m.getError().getMessage().cStr();
      to(State::kFailed);
      return;
    case wire::Message::PROGRESS:
      if (state_ == State::kAccepted && m.getProgress().getJobId() == job_id_) on_progress(m.getProgress());
      return;
    case wire::Message::JOB_RESULT:
      if (state_ != State::kAccepted || m.getJobResult().getJobId() != job_id_) return;
      result_ = result_of(job_id_, m.getJobResult());
      to(State::kDone);
      return;
    default:
      return;
  }
}

void JobRun::on_progress(wire::Progress::Reader p) {
  for (auto n : p.getNotices()) last_notice_ = n.cStr();
  if (!p.getNoWorkers()) {
    if (waiting_for_workers_) watch_workers_(false);
    waiting_for_workers_ = false;
  } else if (!waiting_for_workers_ && options_.no_workers_timeout_ms > 0) {
    waiting_for_workers_ = true;
    chunks_total_ = p.getChunksTotal();
    chunks_left_ = chunks_total_ - p.getChunksDone();
    watch_workers_(true);
  }
  if (options_.on_progress) options_.on_progress(progress_of(job_id_, p));
}

void JobRun::cancel() {
  if (finished()) return;
  cancel_wanted_ = true;
  if (state_ != State::kAccepted) return;
  send_cancel();
  to(State::kCancelled);
}

void JobRun::send_cancel() {
  send_([&](wire::Message::Builder m) { m.initCancel().setJobId(job_id_); });
}

void JobRun::no_workers_timeout() {
  if (state_ != State::kAccepted || !waiting_for_workers_) return;
  waiting_for_workers_ = false;
  failure_ = fmt::format("no workers: none joined within {:g} s, {} of {} left; the job was cancelled "
                         "(a longer no-workers timeout waits longer)",
                         options_.no_workers_timeout_ms / 1000.0, chunks_left_, psched::counted(chunks_total_, "chunk"));
  // Why the workers went, where psched said (a chunk that took them down: scheduler/job_lifecycle.cpp).
  if (!last_notice_.empty()) failure_ += "; psched said: " + last_notice_;
  send_cancel();
  to(State::kFailed);
}

Progress progress_of(uint64_t job_id, psched::wire::Progress::Reader p) {
  Progress progress;
  progress.job_id = job_id;
  progress.chunks_done = p.getChunksDone();
  progress.chunks_total = p.getChunksTotal();
  progress.running_sum = p.getRunningSum();
  progress.no_workers = p.getNoWorkers();
  for (auto n : p.getNotices()) progress.notices.emplace_back(n.cStr());
  for (auto c : p.getPartials()) {
    progress.partials.push_back(
        ChunkPartial{c.getChunk(), c.getSum(), c.getCount(), c.getMin(), c.getMax(), terms_of(c.getExact())});
  }
  return progress;
}

// The result as the scheduler reports it; wall_seconds is the caller's to measure.
Result result_of(uint64_t job_id, psched::wire::JobResult::Reader r) {
  Result result;
  result.job_id = job_id;
  result.sum = r.getSum();
  result.count = r.getCount();
  result.min = r.getMin();
  result.max = r.getMax();
  const auto exact = r.getExact();
  result.exact_terms = terms_of(exact);
  result.nan_count = exact.getNan();
  result.pos_inf_count = exact.getPosInf();
  result.neg_inf_count = exact.getNegInf();
  result.has_squares = r.hasSquares();
  if (result.has_squares) {
    const auto squares = r.getSquares();
    result.squares_terms = terms_of(squares);
    result.squares_nan_count = squares.getNan();
    result.squares_pos_inf_count = squares.getPosInf();
    result.squares_neg_inf_count = squares.getNegInf();
  }
  result.chunks = r.getChunks();
  result.workers = r.getWorkers();
  result.retries = r.getRetries();
  result.scheduler_seconds = r.getSeconds();
  result.verified_chunks = r.getVerifiedChunks();
  result.same_worker_chunks = r.getSameWorkerChunks();
  result.mismatch_count = r.getMismatchCount();
  for (auto m : r.getMismatches()) {
    VerifyMismatch& out = result.mismatches.emplace_back();
    out.chunk = m.getChunk();
    out.chunks = m.getChunks();
    out.note = m.getNote().cStr();
    for (auto c : m.getCopies()) {
      VerifyCopy& copy = out.copies.emplace_back();
      copy.worker_id = c.getWorkerId();
      copy.worker_name = c.getWorkerName().cStr();
      copy.device_name = c.getDeviceName().cStr();
      copy.sum = c.getSum();
      copy.count = c.getCount();
      copy.min = c.getMin();
      copy.max = c.getMax();
      copy.suspect = c.getSuspect();
      copy.exact_terms = terms_of(c.getExact());
      copy.has_squares = c.hasSquares();
      if (copy.has_squares) copy.squares_terms = terms_of(c.getSquares());
    }
  }
  auto figure = [](psched::wire::MinMeanMax::Reader m) { return Figure{m.getMin(), m.getMean(), m.getMax()}; };
  for (auto d : r.getDevices()) {
    DeviceReport out;
    out.worker_id = d.getWorkerId();
    out.name = d.getName().cStr();
    out.host = d.getHost().cStr();
    out.device = d.getDevice().cStr();
    out.uuid = d.getUuid().cStr();
    out.chunks = d.getChunks();
    out.bytes = d.getBytes();
    out.busy_seconds = d.getBusySeconds();
    out.energy_joules = d.getEnergyJoules();
    out.bytes_per_second = d.getBytesPerSecond();
    out.slow = d.getSlow();
    out.cause = d.getCause().cStr();
    out.has_gpu = d.getHasGpu();
    out.sm_clock_mhz = figure(d.getSmClockMhz());
    out.sm_clock_max_mhz = d.getSmClockMaxMhz();
    out.temperature_c = figure(d.getTemperatureC());
    out.power_watts = figure(d.getPowerWatts());
    out.sm_utilisation_pct = figure(d.getSmUtilisationPct());
    out.throttle_reasons = d.getThrottleReasons();
    for (auto p : d.getSeries())
      out.series.push_back(DeviceReport::Point{p.getSeconds(), p.getSmClockMhz(), p.getTemperatureC(),
                                               p.getPowerWatts(), p.getSmUtilisationPct()});
    result.devices.push_back(std::move(out));
  }
  result.timeline.reserve(r.getTimeline().size());
  for (auto t : r.getTimeline())
    result.timeline.push_back(
        TaskSegment{t.getWorkerId(), t.getFirstChunk(), t.getChunks(), t.getStartSeconds(), t.getEndSeconds()});
  return result;
}

}  // namespace pclient
