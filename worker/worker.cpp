// Worker: the link to the scheduler (worker.h): connecting and reconnecting with backoff, Hello and
// Welcome, heartbeats, and leaving or giving up. What travels on it, the work and its results, is
// in worker_tasks.cpp.
#include "worker/worker.h"

#include <capnp/message.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "net/address.h"
#include "net/scheduler_file.h"
#include "net/tls.h"
#include "net/wire_convert.h"
#include "storage/mapped_file.h"

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
  backend_->start([this, alive](std::vector<ChunkOutcome>& outcomes) {
    // Backend thread: hand the outcomes to the loop. Outcomes that arrive while the loop has not
    // yet drained the inbox ride along with the one post already made (no post, no wake-up each).
    bool post = false;
    {
      std::lock_guard<std::mutex> lock(inbox_mutex_);
      // Taken whole into an empty inbox (the backend gets the empty one back), else moved from.
      if (inbox_.empty())
        inbox_.swap(outcomes);
      else
        inbox_.insert(inbox_.end(), std::make_move_iterator(outcomes.begin()),
                      std::make_move_iterator(outcomes.end()));
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
StatusOr<Address> Worker::where() const {
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
  scheduler_.retry_after(jittered(backoff_, jitter_()));
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
    self.readers = backend_->readers();
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

void Worker::heartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(config_.heartbeat_ms));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !scheduler_.open_conn() || link_ != Link::kWelcomed) return;
    const uint64_t used = backend_->memory_used_bytes();
    unmap_idle_files(std::chrono::seconds(kIdleMappingSeconds));  // stored arrays' (storage/mapped_file.h)
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
  unsent_outcomes_.clear();
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
