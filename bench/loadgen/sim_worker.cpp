#include "sim_worker.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/chunk_grid.h"
#include "core/closed_form.h"
#include "net/framing.h"
#include "net/job_definition.h"
#include "net/wire_convert.h"
#include "worker/cuda/batching.h"
#include "worker/result_batches.h"

namespace psched::loadgen {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Every chunk the same shape: the grid divides each axis.
bool chunks_uniform(const JobSpec& s) { return s.rows % s.chunk_rows == 0 && s.cols % s.chunk_cols == 0; }

}  // namespace

SimWorker::SimWorker(Fleet& fleet, uint32_t index)
    : SimPeer(fleet.io(), fleet.scheduler()), fleet_(fleet), index_(index), device_timer_(fleet.io()) {}

void SimWorker::say_hello(wire::Message::Builder m) {
  WorkerInfo self;
  self.name = fmt::format("{}-{}", fleet_.name_prefix(), index_);
  self.host = "loadgen";
  self.pid = uint32_t(getpid());
  self.backend = "cuda";
  self.device_name = "simulated NVIDIA H100 80GB HBM3";
  self.memory_total_bytes = uint64_t{80} << 30;
  self.compute_major = 9;
  self.compute_minor = 0;
  self.threads = 1;
  self.slots = fleet_.device().slots;
  self.window_elements = fleet_.device().window_elements;
  to_wire(self, init_hello(m, wire::Role::WORKER, self.name, "").initWorker());
}

void SimWorker::on_message(wire::Message::Reader message) {
  switch (message.which()) {
    case wire::Message::WELCOME:
      registered_ = true;
      ++fleet_.counters().welcomed;
      ++fleet_.counters().connected_now;
      fleet_.set_heartbeat_ms(message.getWelcome().getHeartbeatMs());
      fleet_.handshake_done();
      return;
    case wire::Message::DEFINE_JOB: {
      JobDefinition d = read_job_definition(message.getDefineJob());  // as pcuda-worker does
      JobEntry entry;
      entry.spec = std::move(d.spec);
      entry.partial_block = d.partial_block;
      if (entry.spec && entry.partial_block != 1 && chunks_uniform(*entry.spec) && fleet_.device().corrupt_chunk < 0 &&
          expected_run_compact(*entry.spec, 0, 1)) {
        entry.uniform = true;
        entry.chunk_busy_seconds = double(entry.spec->chunk_elements()) * fleet_.device().seconds_per_element;
        entry.chunk_seconds = entry.chunk_busy_seconds + fleet_.device().seconds_per_chunk;
      }
      jobs_[d.job_id] = std::move(entry);
      return;
    }
    case wire::Message::TASK_BATCH:
      on_task_batch(message.getTaskBatch());
      return;
    case wire::Message::DROP_JOB: {
      const uint64_t id = message.getDropJob().getJobId();
      jobs_.erase(id);
      // The device finishes what it is on; queued chunks of the job are forgotten.
      const bool head_dropped = !queue_.empty() && queue_.front().job_id == id;
      pacer_.released(queue_.drop_job(id));
      std::erase_if(ready_, [&](const Ready& r) {
        if (r.job_id == id)
          for (const ChunkOutcome& o : r.outcomes) ready_chunks_ -= o.chunks;
        return r.job_id == id;
      });
      if (head_dropped) {
        head_done_at_ = Clock::now();
        if (!queue_.empty()) head_done_at_ += std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(chunk_seconds(queue_.front())));
        arm();
      }
      note_queue(Clock::now());
      return;
    }
    case wire::Message::GIVE_BACK:
      on_give_back(message.getGiveBack());
      return;
    case wire::Message::ERROR:
      spdlog::warn("worker {}: scheduler says: {}", index_, message.getError().getMessage().cStr());
      if (!registered_) ++fleet_.counters().refused;
      return;
    case wire::Message::HEARTBEAT:
    case wire::Message::GOODBYE:  // the close follows
      return;
    default:
      unknown_message(fmt::format("simulated worker {}", index_), message);
  }
}

void SimWorker::on_task_batch(wire::TaskBatch::Reader batch) {
  const bool idle = queue_.empty();
  pacer_.on_task_batch(batch.getReportIntervalUs(), batch.getQueueEmpty());
  for (auto r : batch.getRanges()) {
    const int64_t crash = fleet_.device().crash_chunk;
    if (crash >= 0 && uint64_t(crash) >= r.getFirst() && uint64_t(crash) - r.getFirst() < r.getCount()) {
      kill();
      ++fleet_.counters().kills;
      asio::post(fleet_.io(), [fleet = &fleet_, self = this] { fleet->replace(self); });
      return;
    }
    queue_.push(batch.getJobId(), r.getFirst(), r.getCount(), NoSpec{}, JoinRuns::kNo);
    pacer_.assigned(r.getCount(), Clock::now());
  }
  if (idle && !queue_.empty()) {
    const auto now = Clock::now();
    head_done_at_ = now + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(chunk_seconds(queue_.front())));
    note_queue(now);
    arm();
  }
}

void SimWorker::note_queue(Clock::time_point at) {
  if (queue_.empty() == device_idle_) return;
  device_idle_ = queue_.empty();
  FleetCounters& c = fleet_.counters();
  const double t = std::chrono::duration<double>(at.time_since_epoch()).count();
  device_idle_ ? --c.busy_now : ++c.busy_now;
  if (device_idle_) {
    idle_since_ = at;
    c.last_end_sum += t;  // taken back if the device starts again
  } else if (!device_started_) {
    device_started_ = true;
    ++c.started;
    c.first_start_sum += t;
  } else {
    c.last_end_sum -= std::chrono::duration<double>(idle_since_.time_since_epoch()).count();
    c.gap_seconds += std::chrono::duration<double>(at - idle_since_).count();
  }
}

// As pcuda-worker's: the chunks of the range not on the device yet leave the queue (the head
// chunk, computing until head_done_at_, stays) and the answer goes at once.
void SimWorker::on_give_back(wire::GiveBack::Reader give_back) {
  const uint64_t id = give_back.getJobId(), first = give_back.getFirst();
  const std::vector<ChunkRange> returned = queue_.give_back(id, first, give_back.getCount(), HeadStarted::kYes);
  pacer_.released(build_returned_batch(id, returned, [this](capnp::MessageBuilder& m) { conn()->send(m); }));
  note_queue(Clock::now());
  arm();
}

double SimWorker::chunk_seconds(const Run& run) const {
  return chunk_busy_seconds(run) + fleet_.device().seconds_per_chunk;
}

double SimWorker::chunk_busy_seconds(const Run& run) const {
  auto it = jobs_.find(run.job_id);
  if (it == jobs_.end() || !it->second.spec) return 0;
  const JobSpec& s = *it->second.spec;
  const ChunkBox b = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.box(run.next);
  return double(b.rows * b.cols) * fleet_.device().seconds_per_element;
}

// The device timer fires when the next report is due, not per chunk: at the end of the first
// result batch (result_batch chunks, or the queue dry) at which the pacer would send, as
// pcuda-worker's does; the chunks finishing before then are counted at that tick, each at its own
// simulated time. Runs of uniform chunks are walked arithmetically, others chunk by chunk. (A timer
// per chunk made the loadgen, not psched, the bottleneck of a 64-GPU fleet of 1000² chunks.)
void SimWorker::arm() {
  if (queue_.empty()) return;
  using Seconds = std::chrono::duration<double>;
  auto at = [](Clock::time_point t, double s) {
    return t + std::chrono::duration_cast<Clock::duration>(Seconds(s));
  };
  auto due = head_done_at_;  // when the chunk at queue_[run], `next` is done
  uint64_t ready = ready_chunks_;
  ReportPacer pacer = pacer_;
  for (size_t run = 0; run < queue_.size(); ++run) {
    const Run& r = queue_[run];
    const uint64_t batch = result_batch_for(r.job_id);
    const bool last_run = run + 1 == queue_.size();
    uint64_t next = r.next;
    if (const JobEntry* job = uniform(r)) {
      // Chunk j of the run (0-based) is done at due + j s; after it ready + j + 1 are ready. The
      // pacer is due from j_due on (its own rule, asked for the run at once: ReportPacer::first_due);
      // a report waits for a batch boundary or the queue's last chunk.
      const uint64_t n = r.end - next;
      const double s = job->chunk_seconds;
      uint64_t j_due = pacer.first_due(n, due, s);
      if (last_run) j_due = std::min(j_due, n - 1);  // holding nothing more: due
      if (j_due < n) {
        uint64_t j = j_due + (batch - (ready + j_due + 1) % batch) % batch;
        if (last_run) j = std::min(j, n - 1);
        if (j < n) {
          due = ReportPacer::done_at(due, s, j);  // as first_due counts it
          break;
        }
      }
      ready += n;
      pacer.released(n);
      if (last_run) break;  // unreachable: the last chunk always reports
      due = at(due, double(n - 1) * s + chunk_seconds(queue_[run + 1]));
      continue;
    }
    bool found = false;
    for (;;) {
      ++ready;
      pacer.released(1);
      const bool last = next + 1 == r.end && last_run;
      if ((last || ready % batch == 0) && pacer.due(due)) {
        found = true;
        break;
      }
      if (++next == r.end) break;
      due = at(due, chunk_seconds(Run{r.job_id, next, r.end, NoSpec{}}));
    }
    if (found || last_run) break;
    due = at(due, chunk_seconds(queue_[run + 1]));
  }
  device_timer_.expires_at(due);
  std::weak_ptr<SimWorker> weak = std::static_pointer_cast<SimWorker>(shared_from_this());
  device_timer_.async_wait([weak](const boost::system::error_code& ec) {
    if (auto s = weak.lock(); s && !ec) s->on_device_tick();
  });
}

const SimWorker::JobEntry* SimWorker::uniform(const Run& run) const {
  auto it = jobs_.find(run.job_id);
  return it != jobs_.end() && it->second.uniform ? &it->second : nullptr;
}

std::optional<CompactPartial> SimWorker::chunk_partial(JobEntry& job, uint64_t chunk) {
  const JobSpec& s = *job.spec;
  auto from_closed_form = [&]() -> std::optional<CompactPartial> {
    std::optional<PartialSum> partial = expected_chunk_partial(s, chunk);
    if (!partial) return std::nullopt;
    if (int64_t(chunk) == fleet_.device().corrupt_chunk) {
      partial->exact.add(1.0);
      partial->sum = partial->exact.rounded();
    }
    return compact(*partial);
  };
  if (s.generator != Generator::kConstant || int64_t(chunk) == fleet_.device().corrupt_chunk)
    return from_closed_form();
  const ChunkBox b = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.box(chunk);
  const uint64_t count =
      select_axis(b.row0, b.row0 + b.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step).count *
      select_axis(b.col0, b.col0 + b.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step).count;
  auto [it, fresh] = job.constant_partials.try_emplace(count);
  if (fresh) it->second = from_closed_form();
  return it->second;
}

// Every chunk whose simulated finish time has passed is ready; ready chunks are reported, one
// ResultBatch per job (runs merged), when the pacer says so, as a real worker's are.
void SimWorker::on_device_tick() {
  if (!conn()) return;
  const auto now = Clock::now();
  while (!queue_.empty() && head_done_at_ <= now) {
    const Run& run = queue_.front();
    if (ready_.empty() || ready_.back().job_id != run.job_id) ready_.push_back({run.job_id, {}});
    Ready& r = ready_.back();
    ChunkOutcome& o = r.outcomes.emplace_back();
    // The last chunk taken, after the head one.
    const double last_done_s = finish_chunks(run, std::chrono::duration<double>(now - head_done_at_).count(), o);
    ready_chunks_ += o.chunks;
    pacer_.released(o.chunks);
    queue_.take(o.chunks, Turns::kInOrder);
    if (queue_.empty())  // the device ran dry when its last chunk ended
      note_queue(head_done_at_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(last_done_s)));
    // Rounded up: chunks shorter than the clock's tick (100 elements take 0.67 ns) would otherwise
    // leave the head at or before `now`, and the loop would walk the run two chunks at a time.
    if (!queue_.empty())
      head_done_at_ += std::chrono::ceil<Clock::duration>(
          std::chrono::duration<double>(last_done_s + chunk_seconds(queue_.front())));
  }
  if (ready_chunks_ > 0 && pacer_.due(now)) {
    report();
    pacer_.reported(now);
  }
  arm();
}

double SimWorker::finish_chunks(const Run& run, double behind, ChunkOutcome& o) {
  o.chunk = run.next;
  auto it = jobs_.find(run.job_id);
  if (const JobEntry* job = uniform(run)) {
    // Every chunk of the run done by now, at once, up to a verify block's end (DefineJob.partialBlock).
    uint64_t n = std::min<uint64_t>(run.end - run.next, 1 + uint64_t(behind / job->chunk_seconds));
    if (job->partial_block > 1) n = std::min(n, job->partial_block - run.next % job->partial_block);
    std::optional<CompactPartial> partial = expected_run_compact(*job->spec, run.next, n);
    if (partial) {
      o.chunks = n;
      o.busy_seconds = double(n) * job->chunk_busy_seconds;
      o.partial = std::move(*partial);
      return double(n - 1) * job->chunk_seconds;
    }
  }
  o.busy_seconds = chunk_busy_seconds(run);
  std::optional<CompactPartial> partial;
  if (it != jobs_.end() && it->second.spec) partial = chunk_partial(it->second, run.next);
  if (partial) {
    o.partial = std::move(*partial);
  } else {
    o.ok = false;
    o.error = "simulated worker: this job has no exact closed form (use arange or constant with integer values)";
  }
  return 0;
}

// Chunks reported together: the option, or one CUDA batch of the job's chunks.
uint64_t SimWorker::result_batch_for(uint64_t job_id) const {
  if (fleet_.device().result_batch > 0) return fleet_.device().result_batch;
  auto it = jobs_.find(job_id);
  return it == jobs_.end() || !it->second.spec ? 1 : psched::gpu::chunks_per_batch(*it->second.spec);
}

void SimWorker::report() {
  FleetCounters& c = fleet_.counters();
  for (const Ready& r : ready_) {
    auto job = jobs_.find(r.job_id);
    const uint64_t partial_block = job != jobs_.end() ? job->second.partial_block : 1;
    build_result_batches(r.job_id, r.outcomes, kDefaultMaxFrameBytes, partial_block,
                         [&](capnp::MessageBuilder& m) { conn()->send(m); });
    for (const ChunkOutcome& o : r.outcomes) {
      (o.ok ? c.chunks_done : c.chunks_refused) += o.chunks;
      c.busy_seconds += o.busy_seconds;
    }
  }
  ready_.clear();
  ready_chunks_ = 0;
}

void SimWorker::heartbeat() {
  if (!registered_ || !conn()) return;
  send_message(*conn(), [](wire::Message::Builder m) { m.initHeartbeat().setMemoryUsedBytes(0); });
}

void SimWorker::reset_device() {
  device_timer_.cancel();
  queue_.clear();
  note_queue(Clock::now());
  ready_.clear();
  ready_chunks_ = 0;
  jobs_.clear();
  if (registered_) --fleet_.counters().connected_now;
  registered_ = false;
}

void SimWorker::on_close(const std::string& why) {
  const bool was_handshaking = !registered_;
  reset_device();
  if (stopped() || fleet_.stopping()) return;
  ++fleet_.counters().disconnects;
  spdlog::debug("worker {}: disconnected: {}", index_, why);
  if (was_handshaking) fleet_.handshake_done();
  // The scheduler went away (restart, network): try again, as pcuda-worker does.
  reconnect_after(std::chrono::milliseconds(100 + index_ % 100));
}

void SimWorker::kill() {
  reset_device();
  drop();
}

void SimWorker::leave() {
  reset_device();
  SimPeer::leave("loadgen done");
}

}  // namespace psched::loadgen
