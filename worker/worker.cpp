#include "worker/worker.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"
#include "core/chunk_grid.h"
#include "core/plural.h"
#include "net/address.h"
#include "net/scheduler_file.h"
#include "net/tls.h"
#include "net/wire_convert.h"
#include "worker/result_batches.h"

namespace psched {

namespace asio = boost::asio;

Worker::Worker(asio::io_context& io, WorkerConfig config, std::unique_ptr<Backend> backend)
    : io_(io),
      config_(std::move(config)),
      backend_(std::move(backend)),
      watchdog_(std::make_shared<LoopWatchdog>(io)),
      scheduler_(io, config_.tls, config_.max_frame_bytes,
                 {[this] { return where(); }, [this](FramedConnection& c) { on_connected(c); },
                  [this](wire::Message::Reader m) { on_message(m); },
                  [this](const Status& why, bool was_open) { on_link_closed(why, was_open); }}),
      heartbeat_timer_(io),
      report_timer_(io) {
  device_ = backend_->info();
}

Worker::~Worker() {
  *alive_ = false;
  backend_->stop();
}

void Worker::start() {
  disconnected_since_ = std::chrono::steady_clock::now();
  watchdog_->start([](double seconds) {
    spdlog::warn("this worker's event loop did not run for {:.1f} s (stopped, paused or starved): "
                 "the scheduler's silence is counted from now", seconds);
  });
  std::weak_ptr<bool> alive = alive_;
  backend_->start([this, alive](ChunkOutcome outcome) {
    // Backend thread: hand the outcome to the loop. Outcomes that arrive while the loop has not
    // yet drained the inbox ride along with the one post already made (no post, no wake-up each).
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(inbox_mutex_);
      inbox_.push_back(std::move(outcome));
      post = !inbox_posted_;
      inbox_posted_ = true;
    }
    if (post) asio::post(io_, [this, alive] {
      if (alive.lock()) drain_inbox();
    });
  });
  scheduler_.connect();
}

// Where the scheduler is now: --scheduler, or the scheduler file (read at each attempt: a restarted
// scheduler rewrites it). A file not there yet is a failure to retry; a bad address is a usage error.
Result<Address> Worker::where() const {
  std::string address_text = config_.scheduler_address;
  if (address_text.empty()) {
    auto info = read_scheduler_file(config_.scheduler_file);
    if (!info) return Status::error(fmt::format("waiting for the scheduler file ({})", info.message()));
    address_text = info->address;
  }
  return scheduler_address(address_text, config_.tls != nullptr);
}

void Worker::on_link_closed(const Status& why, bool was_open) {
  if (link_ == Link::kLeaving) return;
  if (was_open) {
    on_disconnected(why.message());
    return;
  }
  if (why.code() == StatusCode::kInvalid) {
    give_up(why);
    return;
  }
  if (!warned_unreachable_) spdlog::warn("{}; retrying", why.message());
  warned_unreachable_ = true;
  schedule_reconnect();
}

void Worker::schedule_reconnect() {
  if (link_ == Link::kLeaving) return;
  const auto away = std::chrono::steady_clock::now() - disconnected_since_;
  if (config_.death_timeout_s > 0 && away >= std::chrono::seconds(config_.death_timeout_s)) {
    give_up(fmt::format("no scheduler for {} s (--death-timeout), exiting", config_.death_timeout_s), kExitOk);
    return;
  }
  scheduler_.retry_after(backoff_);
  backoff_ = std::min(backoff_ * 2, std::chrono::milliseconds(2000));
}

void Worker::on_connected(FramedConnection& conn) {
  transition(Link::kConnected);
  conn.set_idle_timeout(std::chrono::milliseconds(config_.scheduler_timeout_ms), watchdog_);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  send_message(conn, [&](wire::Message::Builder m) {
    auto hello = init_hello(m, wire::Role::WORKER, config_.name, config_.token);
    WorkerInfo self;
    static_cast<DeviceInfo&>(self) = device_;
    self.name = config_.name;
    self.host = host;
    self.pid = uint32_t(getpid());
    self.slots = uint32_t(backend_->slots());
    self.window_elements = backend_->window_elements();
    self.cpu_affinity = config_.cpu_affinity;
    to_wire(self, hello.initWorker());
  });
}

void Worker::on_message(wire::Message::Reader message) {
  if (link_ == Link::kLeaving) return;  // saying goodbye: nothing more is taken on
  switch (message.which()) {
    case wire::Message::WELCOME:
      on_welcome(message.getWelcome());
      return;
    case wire::Message::ERROR: {
      const std::string text = message.getError().getMessage().cStr();
      spdlog::error("scheduler refused us: {}", text);
      // A wrong token or protocol will not fix itself: exit rather than retry forever.
      if (link_ != Link::kWelcomed) give_up(Status::error(fmt::format("scheduler refused registration: {}", text)));
      return;
    }
    case wire::Message::HEARTBEAT:
      return;
    case wire::Message::DEFINE_JOB:
      on_define_job(message.getDefineJob());
      return;
    case wire::Message::TASK_BATCH:
      on_task_batch(message.getTaskBatch());
      return;
    case wire::Message::DROP_JOB:
      on_drop_job(message.getDropJob().getJobId());
      return;
    case wire::Message::GIVE_BACK:
      on_give_back(message.getGiveBack());
      return;
    case wire::Message::GOODBYE:
      spdlog::warn("scheduler says goodbye: {}", message.getGoodbye().getReason().cStr());
      conn()->close("scheduler said goodbye");
      return;
    default:
      conn()->send_error_and_close(
          fmt::format("unexpected message kind {} for a worker", unsigned(message.which())));
  }
}

void Worker::on_welcome(wire::Welcome::Reader welcome) {
  if (link_ != Link::kConnected) {
    conn()->send_error_and_close("a second Welcome");
    return;
  }
  transition(Link::kWelcomed);
  warned_unreachable_ = false;
  backoff_ = std::chrono::milliseconds(100);
  spdlog::info("registered with the scheduler at {} as worker {} ({} backend, {})", conn()->remote(),
               welcome.getPeerId(), device_.backend, device_.device_name);
  // The scheduler's pace and frame limit: a heartbeat it can count on within its timeout,
  // ResultBatches it will not refuse.
  if (const uint32_t hb = welcome.getHeartbeatMs(); hb > 0) config_.heartbeat_ms = std::max<uint32_t>(hb, 50);
  if (const uint32_t frame = welcome.getMaxFrameBytes(); frame > 0) config_.scheduler_max_frame_bytes = frame;
  heartbeat();
}

void Worker::on_define_job(wire::DefineJob::Reader d) {
  const uint64_t job_id = d.getJobId();
  if (jobs_.count(job_id)) return;  // defined already
  JobEntry entry;
  entry.local_key = next_local_key_++;
  entry.partial_block = d.getPartialBlock();
  JobSpec spec = from_wire(d.getSpec());
  if (Status st = validate(spec); !st) {
    spdlog::error("job {}: invalid spec from scheduler: {}", job_id, st.message());
  } else {
    entry.spec = std::make_shared<const JobSpec>(normalized(spec));
  }
  job_of_key_[entry.local_key] = job_id;
  jobs_[job_id] = std::move(entry);
}

void Worker::on_drop_job(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it != jobs_.end()) {
    backend_->drop_job(it->second.local_key);
    job_of_key_.erase(it->second.local_key);
    jobs_.erase(it);
  }
  pending_.erase(job_id);
  if (auto held = held_by_job_.find(job_id); held != held_by_job_.end()) {
    pacer_.released(held->second);  // its later outcomes are dropped unseen
    held_by_job_.erase(held);
  }
}

void Worker::on_task_batch(wire::TaskBatch::Reader batch) {
  const uint64_t job_id = batch.getJobId();
  pacer_.on_task_batch(batch.getReportIntervalUs(), batch.getQueueEmpty());
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
        add_pending(std::move(bad));
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
  std::vector<ChunkRun> returned;
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
  for (ChunkOutcome& o : draining_) on_outcome(std::move(o));
  draining_.clear();  // keeps its capacity for the next swap
}

void Worker::on_outcome(ChunkOutcome outcome) {
  if (link_ == Link::kLeaving) return;
  if (outcome.device_lost) {
    lose_device(std::move(outcome));
    return;
  }
  auto it = job_of_key_.find(outcome.job_id);
  if (it == job_of_key_.end()) return;  // dropped job, or one of an earlier connection
  outcome.job_id = it->second;
  if (outcome.ok && config_.flip_chunk >= 0 && outcome.chunk == uint64_t(config_.flip_chunk)) {
    // As a GPU that computes wrong would: the chunk's value itself (its exact sum, which the
    // scheduler merges and rounds) becomes the sum with its last bit flipped.
    uint64_t bits;
    std::memcpy(&bits, &outcome.partial.sum, sizeof bits);
    bits ^= 1;
    std::memcpy(&outcome.partial.sum, &bits, sizeof bits);
    ExactSum flipped;
    flipped.add(outcome.partial.sum);
    outcome.partial.exact = ExactTerms(flipped);
  }
  add_pending(std::move(outcome));
}

// The device's context is gone for good: report the chunk that failed, then leave (the scheduler
// re-queues what we held) and exit non-zero, so that our supervisor starts a worker with a fresh
// context.
void Worker::lose_device(ChunkOutcome outcome) {
  const std::string error = outcome.error;
  if (auto it = job_of_key_.find(outcome.job_id); it != job_of_key_.end()) {
    outcome.job_id = it->second;
    add_pending(std::move(outcome));
    flush_results();
  }
  exit_code_ = kExitDeviceLost;
  spdlog::error("device lost: {}; leaving so that a fresh worker can take over", error);
  leave("device lost: " + error, [this] { io_.stop(); });
}

void Worker::add_pending(ChunkOutcome outcome) {
  if (!scheduler_.open_conn()) return;
  release(outcome.job_id, outcome.chunks);
  auto [it, added] = pending_.try_emplace(outcome.job_id);
  if (added) it->second.swap(spare_outcomes_);
  it->second.push_back(std::move(outcome));
  if (flush_posted_) return;
  if (pacer_.due(std::chrono::steady_clock::now())) {
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
    if (ec || flush_posted_ || pending_.empty()) return;
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
    pending_.clear();
    return;
  }
  for (auto& [job_id, outcomes] : pending_) {
    if (outcomes.empty()) continue;
    auto job = jobs_.find(job_id);
    const uint64_t partial_block = job != jobs_.end() ? job->second.partial_block : 1;
    build_result_batches(job_id, outcomes, config_.scheduler_max_frame_bytes, partial_block,
                         [this](capnp::MessageBuilder& m) { conn()->send(m); });
    outcomes.clear();
    if (outcomes.capacity() > spare_outcomes_.capacity()) outcomes.swap(spare_outcomes_);
  }
  pending_.clear();
}

void Worker::heartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(config_.heartbeat_ms));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !scheduler_.open_conn() || link_ != Link::kWelcomed) return;
    const uint64_t used = backend_->memory_used_bytes();
    const std::optional<GpuHealth> gpu = gpu_ ? std::optional(gpu_->take()) : std::nullopt;
    send_message(*conn(), [&](wire::Message::Builder m) {
      auto hb = m.initHeartbeat();
      hb.setMemoryUsedBytes(used);
      if (gpu) to_wire(*gpu, hb.initGpu());
    });
    heartbeat();
  });
}

void Worker::on_disconnected(const std::string& why) {
  if (link_ == Link::kLeaving) return;
  heartbeat_timer_.cancel();
  // Whatever we held is re-queued by the scheduler; drop it here.
  for (auto& [id, entry] : jobs_) backend_->drop_job(entry.local_key);
  jobs_.clear();
  job_of_key_.clear();
  pending_.clear();
  held_by_job_.clear();
  pacer_ = ReportPacer{};
  // A certificate refused, or the other protocol: the same settings will not do better next time.
  if (link_ != Link::kWelcomed && conn() && conn()->refused_by_tls()) {
    give_up(Status::error(fmt::format("cannot connect to the scheduler: {}", why)));
    return;
  }
  if (link_ == Link::kWelcomed) {
    spdlog::warn("lost the scheduler: {}; reconnecting", why);
    disconnected_since_ = std::chrono::steady_clock::now();
  } else if (!warned_unreachable_) {
    spdlog::warn("connection to the scheduler failed: {}; retrying", why);
    warned_unreachable_ = true;
  }
  transition(Link::kDisconnected);
  schedule_reconnect();
}

void Worker::leave(const std::string& reason, std::function<void()> on_left) {
  if (link_ == Link::kLeaving) return;
  transition(Link::kLeaving);
  spdlog::info("leaving: {}", reason);
  scheduler_.stop();
  heartbeat_timer_.cancel();
  watchdog_->stop();
  backend_->stop();
  if (FramedConnection* c = scheduler_.open_conn()) {
    send_message(*c, [&](wire::Message::Builder m) { m.initGoodbye().setReason(reason); });
    // The connection's close handler is ours; swap in one that reports the goodbye was written.
    auto done = std::make_shared<std::function<void()>>(std::move(on_left));
    c->start_closing([done] { (*done)(); });
  } else {
    asio::post(io_, std::move(on_left));
  }
}

void Worker::transition(Link to) {
  // Legal: disconnected -> connected (a socket), connected -> welcomed (Welcome), connected or
  // welcomed -> disconnected (the connection dropped), disconnected -> disconnected (a connect that
  // failed), and anything but leaving -> leaving; leaving is final.
  const bool legal = link_ != Link::kLeaving &&
                     (to == Link::kLeaving || to == Link::kDisconnected ||
                      (to == Link::kConnected && link_ == Link::kDisconnected) ||
                      (to == Link::kWelcomed && link_ == Link::kConnected));
  PSCHED_ASSERT(legal, int(link_), int(to));
  link_ = to;
}

void Worker::give_up(const Status& failure) { give_up(failure.message(), psched::exit_code(failure.code())); }

void Worker::give_up(const std::string& why, int code) {
  if (link_ == Link::kLeaving) return;
  if (code == kExitOk) {
    spdlog::warn("{}", why);
  } else {
    spdlog::error("{}", why);
  }
  exit_code_ = code;
  transition(Link::kLeaving);
  scheduler_.stop();
  heartbeat_timer_.cancel();
  watchdog_->stop();
  backend_->stop();
  if (conn()) conn()->close(why);
  io_.stop();
}

}  // namespace psched
