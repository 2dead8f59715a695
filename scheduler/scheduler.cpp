#include "scheduler/scheduler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/chunk_grid.h"
#include "common/logging.h"
#include "common/scheduler_file.h"
#include "common/wire_convert.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

struct Scheduler::Peer {
  // Weak: the connection's handlers own the Peer, so a strong pointer back would be a cycle that
  // outlives the loop (the connection lives through its pending operations and its record).
  std::weak_ptr<FramedConnection> conn;
  std::string remote;
  enum class Kind { kNew, kWorker, kClient } kind = Kind::kNew;
  uint32_t id = 0;
};

namespace {

// Chunks of all running jobs together that the scheduler keeps state for (~40 bytes each): many
// jobs of the largest size validate() allows must not add up to more memory than the host has.
constexpr uint64_t kMaxTrackedChunks = uint64_t{1} << 26;

// Largest frame before a peer's Hello is accepted (a Hello is well under 8 KiB): an unauthenticated
// connection cannot make us buffer --max-frame bytes.
constexpr uint32_t kMaxHelloFrameBytes = 64u << 10;

// Worker names in first-seen order, each once (a restarted worker may fail a chunk twice).
std::vector<std::string> distinct(const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (const auto& n : names)
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  return out;
}

bool same_token(const std::string& a, const std::string& b) {
  // Constant time in the length of the expected token.
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < b.size(); ++i) diff |= unsigned(b[i]) ^ unsigned(i < a.size() ? a[i] : 0);
  return diff == 0;
}

}  // namespace

Scheduler::Scheduler(asio::io_context& io, SchedulerConfig config)
    : io_(io), config_(std::move(config)), acceptor_(io), heartbeat_timer_(io) {}

Scheduler::~Scheduler() = default;

std::string Scheduler::address() const {
  std::string host = config_.host;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "127.0.0.1";
  }
  if (host.find(':') != std::string::npos) return fmt::format("tcp://[{}]:{}", host, port_);
  return fmt::format("tcp://{}:{}", host, port_);
}

Status Scheduler::start() {
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  if (config_.host.empty()) {
    endpoint = tcp::endpoint(tcp::v4(), config_.port);
  } else {
    tcp::resolver resolver(io_);
    auto results = resolver.resolve(config_.host, std::to_string(config_.port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty())
      return Status::error(fmt::format("cannot resolve --host '{}': {}", config_.host, ec.message()));
    endpoint = results.begin()->endpoint();
  }
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::error(fmt::format("cannot listen on {}:{}: {}",
                                     config_.host.empty() ? "0.0.0.0" : config_.host,
                                     config_.port, ec.message()));
  port_ = acceptor_.local_endpoint().port();
  spdlog::info("psched {} listening on {} (protocol {})", PSCHED_VERSION, address(),
               wire::PROTOCOL_VERSION);
  if (!config_.token.empty()) spdlog::info("token authentication is on");
  accept();
  heartbeat();
  return Status::ok();
}

Status Scheduler::publish(const std::string& dashboard_url) {
  if (config_.scheduler_file.empty()) return Status::ok();
  SchedulerFileInfo info{address(), dashboard_url, wire::PROTOCOL_VERSION, int64_t(getpid())};
  if (Status st = write_scheduler_file(config_.scheduler_file, info); !st) return st;
  spdlog::info("scheduler file written to {}", config_.scheduler_file);
  return Status::ok();
}

void Scheduler::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) {
      auto peer = std::make_shared<Peer>();
      auto conn = std::make_shared<FramedConnection>(
          std::move(socket), std::min(config_.max_frame_bytes, kMaxHelloFrameBytes));
      peer->conn = conn;
      peer->remote = conn->remote();
      if (connections_ >= config_.max_connections) {
        ++counters_.connections_refused;
        spdlog::warn("refusing connection from {}: {} connections already open", conn->remote(),
                     connections_);
        conn->start({[](wire::Message::Reader) {}, nullptr});
        conn->send_error_and_close(fmt::format(
            "scheduler has too many connections ({})", config_.max_connections));
      } else {
        ++connections_;
        conn->start({[this, peer](wire::Message::Reader m) { on_message(peer, m); },
                     [this, peer](const std::string& why) { on_close(peer, why); }});
        conn->set_idle_timeout(std::chrono::milliseconds(config_.handshake_timeout_ms));
      }
    } else {
      // Out of descriptors (EMFILE) and the like: retrying at once would spin; pause instead.
      spdlog::warn("accept failed: {}; pausing accepts for 100 ms", ec.message());
      auto pause = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
      pause->async_wait([this, pause](const boost::system::error_code& ec2) {
        if (!ec2 && acceptor_.is_open()) accept();
      });
      return;
    }
    accept();
  });
}

void Scheduler::heartbeat() {
  if (shutting_down_) return;
  capnp::MallocMessageBuilder m(16);
  m.initRoot<wire::Message>().initHeartbeat();
  for (auto& [id, w] : workers_) w->conn->send(m);
  for (auto& [id, c] : clients_) c->conn->send(m);
  heartbeat_timer_.expires_after(std::chrono::milliseconds(config_.heartbeat_ms));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) heartbeat();
  });
}

void Scheduler::protocol_error(FramedConnection& conn, const std::string& message) {
  ++counters_.protocol_errors;
  spdlog::warn("{}: {}", conn.remote(), message);
  conn.send_error_and_close(message);
}

void Scheduler::on_message(const std::shared_ptr<Peer>& peer, wire::Message::Reader message) {
  switch (peer->kind) {
    case Peer::Kind::kNew:
      if (message.which() != wire::Message::HELLO) {
        if (auto conn = peer->conn.lock())
          protocol_error(*conn, "expected Hello as the first message");
        return;
      }
      on_hello(peer, message.getHello());
      return;
    case Peer::Kind::kWorker: {
      auto it = workers_.find(peer->id);
      if (it != workers_.end()) on_worker_message(*it->second, message);
      return;
    }
    case Peer::Kind::kClient: {
      auto it = clients_.find(peer->id);
      if (it != clients_.end()) on_client_message(*it->second, message);
      return;
    }
  }
}

void Scheduler::on_close(const std::shared_ptr<Peer>& peer, const std::string& why) {
  --connections_;
  if (shutting_down_ && connections_ == 0 && on_drained_) asio::post(io_, std::move(on_drained_));
  switch (peer->kind) {
    case Peer::Kind::kNew:
      spdlog::debug("{}: closed before Hello: {}", peer->remote, why);
      return;
    case Peer::Kind::kWorker:
      remove_worker(peer->id, why, /*graceful=*/false);
      return;
    case Peer::Kind::kClient: {
      auto it = clients_.find(peer->id);
      if (it == clients_.end()) return;
      const std::set<JobId> jobs = it->second->jobs;
      spdlog::info("client {} ({}) left: {}", it->second->name, peer->remote, why);
      clients_.erase(it);
      for (JobId job : jobs) cancel_job(job);
      return;
    }
  }
}

void Scheduler::on_hello(const std::shared_ptr<Peer>& peer, wire::Hello::Reader hello) {
  const std::shared_ptr<FramedConnection> conn_owner = peer->conn.lock();
  if (!conn_owner) return;
  FramedConnection& conn = *conn_owner;
  if (shutting_down_) {
    conn.send_error_and_close("scheduler shutting down");
    return;
  }
  if (hello.getProtocolVersion() != wire::PROTOCOL_VERSION) {
    protocol_error(conn, fmt::format("protocol version mismatch: scheduler speaks {}, peer speaks {}",
                                     wire::PROTOCOL_VERSION, hello.getProtocolVersion()));
    return;
  }
  if (!config_.token.empty()) {
    if (!hello.hasToken() || hello.getToken().size() == 0) {
      protocol_error(conn, "this scheduler requires a token (--token-file or PSCHED_TOKEN)");
      return;
    }
    const auto token = hello.getToken();  // all its bytes: a NUL must not end the comparison early
    if (!same_token(std::string(token.begin(), token.size()), config_.token)) {
      protocol_error(conn, "invalid token");
      return;
    }
  }
  const uint32_t id = next_peer_id_++;
  const std::string name = hello.hasName() && hello.getName().size() > 0
                               ? printable(hello.getName().cStr(), 128)
                               : fmt::format("peer-{}", id);
  if (hello.getRole() == wire::Role::WORKER) {
    auto w = std::make_unique<WorkerRecord>();
    auto info = hello.getWorker();
    w->id = id;
    w->name = name;
    w->host = printable(info.getHost().cStr(), 256);
    w->pid = info.getPid();
    w->backend = printable(info.getBackend().cStr(), 32);
    w->device_name = printable(info.getDeviceName().cStr(), 256);
    w->memory_total_bytes = info.getMemoryTotalBytes();
    w->memory_limit_bytes = info.getMemoryLimitBytes();
    w->compute_major = info.getComputeMajor();
    w->compute_minor = info.getComputeMinor();
    w->threads = info.getThreads();
    w->slots = std::clamp<uint32_t>(info.getSlots(), 1, 4096);
    w->window_elements = info.getWindowElements();
    w->conn = conn_owner;
    peer->kind = Peer::Kind::kWorker;
    peer->id = id;
    conn.set_idle_timeout(std::chrono::milliseconds(config_.worker_timeout_ms));
    if (w->backend == "cuda") {
      spdlog::info("worker {} '{}' joined from {}: cuda {} (sm_{}{}), {:.1f} GiB, window {}", id,
                   name, conn.remote(), w->device_name, w->compute_major, w->compute_minor,
                   double(w->memory_total_bytes) / double(1ull << 30), w->slots);
    } else {
      spdlog::info("worker {} '{}' joined from {}: {} {} threads, window {}", id, name,
                   conn.remote(), w->backend, w->threads, w->slots);
    }
    workers_[id] = std::move(w);
  } else if (hello.getRole() == wire::Role::CLIENT) {
    auto c = std::make_unique<ClientRecord>();
    c->id = id;
    c->name = name;
    c->conn = conn_owner;
    peer->kind = Peer::Kind::kClient;
    peer->id = id;
    conn.set_idle_timeout(std::chrono::milliseconds(config_.client_timeout_ms));
    spdlog::debug("client {} '{}' connected from {}", id, name, conn.remote());
    clients_[id] = std::move(c);
  } else {
    protocol_error(conn, "unknown role in Hello");
    return;
  }
  conn.set_max_frame_bytes(config_.max_frame_bytes);
  send_message(conn, [&](wire::Message::Builder m) {
    auto welcome = m.initWelcome();
    welcome.setProtocolVersion(wire::PROTOCOL_VERSION);
    welcome.setPeerId(id);
    welcome.setHeartbeatMs(config_.heartbeat_ms);
    welcome.setSchedulerVersion(PSCHED_VERSION);
  });
  if (peer->kind == Peer::Kind::kWorker) dispatch_to(*workers_[id]);
}

void Scheduler::on_worker_message(WorkerRecord& worker, wire::Message::Reader message) {
  switch (message.which()) {
    case wire::Message::HEARTBEAT:
      worker.memory_used_bytes = message.getHeartbeat().getMemoryUsedBytes();
      return;
    case wire::Message::RESULT_BATCH:
      on_results(worker, message.getResultBatch());
      return;
    case wire::Message::GOODBYE: {
      auto conn = worker.conn;
      remove_worker(worker.id,
                    fmt::format("leaving: {}", printable(message.getGoodbye().getReason().cStr())),
                    /*graceful=*/true);
      conn->close_when_flushed();
      return;
    }
    case wire::Message::ERROR:
      spdlog::warn("worker {} '{}' reports: {}", worker.id, worker.name,
                   printable(message.getError().getMessage().cStr(), 1000));
      return;
    default:
      protocol_error(*worker.conn, fmt::format("unexpected message kind {} from a worker",
                                               unsigned(message.which())));
  }
}

void Scheduler::on_client_message(ClientRecord& client, wire::Message::Reader message) {
  switch (message.which()) {
    case wire::Message::HEARTBEAT:
      return;
    case wire::Message::SUBMIT:
      on_submit(client, message.getSubmit());
      return;
    case wire::Message::CANCEL: {
      const JobId id = message.getCancel().getJobId();
      if (client.jobs.count(id)) cancel_job(id);
      return;
    }
    case wire::Message::CLUSTER_INFO_REQUEST:
      send_cluster_info(client, message.getClusterInfoRequest().getTag());
      return;
    case wire::Message::GOODBYE:
      client.conn->close_when_flushed();
      return;
    default:
      protocol_error(*client.conn, fmt::format("unexpected message kind {} from a client",
                                               unsigned(message.which())));
  }
}

void Scheduler::on_submit(ClientRecord& client, wire::Submit::Reader submit) {
  JobSpec spec = from_wire(submit.getSpec());
  if (Status st = validate(spec); !st) {
    send_message(*client.conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(0);
      f.setMessage(fmt::format("invalid job: {}", st.message()));
    });
    spdlog::info("client {} '{}': refused job: {}", client.id, client.name, st.message());
    return;
  }
  const JobSpec job_spec = normalized(spec);
  const uint64_t chunks = ChunkGrid{job_spec.rows, job_spec.cols, job_spec.chunk_rows,
                                    job_spec.chunk_cols}.chunks();
  uint64_t tracked = 0;
  for (const auto& [jid, j] : jobs_) tracked += j->chunks();
  if (tracked + chunks > kMaxTrackedChunks) {
    send_message(*client.conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(0);
      f.setMessage(fmt::format("scheduler busy: {} running jobs hold {} chunks; this job's {} more "
                               "would pass the limit of {} (submit it when some finish)",
                               jobs_.size(), tracked, chunks, kMaxTrackedChunks));
    });
    spdlog::warn("client {} '{}': refused a job of {} chunks: {} chunks already tracked", client.id,
                 client.name, chunks, tracked);
    return;
  }
  const JobId id = next_job_id_++;
  auto job = std::make_unique<Job>(id, client.id, std::make_shared<const JobSpec>(job_spec),
                                   submit.getWantPartials());
  ++counters_.jobs_submitted;
  if (spdlog::should_log(spdlog::level::info))  // describe() is not free: tiny jobs notice
    spdlog::info("job {} from client '{}': {} ({} chunks)", id, client.name, describe(spec),
                 job->chunks());
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto a = m.initJobAccepted();
    a.setTag(submit.getTag());
    a.setJobId(id);
    a.setChunks(job->chunks());
  });
  client.jobs.insert(id);
  jobs_[id] = std::move(job);
  dispatch();
}

void Scheduler::on_results(WorkerRecord& worker, wire::ResultBatch::Reader batch) {
  const JobId job_id = batch.getJobId();
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    if (job_id == 0 || job_id >= next_job_id_) {
      protocol_error(*worker.conn, fmt::format("results for unknown job {}", job_id));
      return;
    }
    // The job finished, failed or was cancelled meanwhile: its late results are dropped (its
    // chunks left the worker's window when the job was forgotten).
    dispatch_to(worker);
    return;
  }
  Job& job = *it->second;
  // A worker's own figure: NaN, infinite or negative would poison the counters for good.
  const double busy = std::isfinite(batch.getBusySeconds()) && batch.getBusySeconds() >= 0
                          ? batch.getBusySeconds()
                          : 0.0;
  worker.busy_seconds += busy;
  if (const uint64_t n = batch.getResults().size() + batch.getFailures().size(); n > 0)
    counters_.chunk_seconds.observe(busy / double(n), n);
  const uint64_t chunk_bytes = job.spec()->chunk_bytes();
  // All or nothing: a batch naming a chunk this worker does not hold is refused whole. Applying its
  // good results first would keep a liar's partials, and could leave a job with every chunk done
  // and no one to complete it.
  for (auto r : batch.getResults()) {
    const uint64_t chunk = r.getChunk();
    const bool held = chunk < job.chunks() && job.state(chunk) == TaskState::kRunning &&
                      job.running_on(chunk) == worker.id;
    const bool duplicate = chunk < job.chunks() && job.state(chunk) == TaskState::kDone;
    if (held || duplicate) continue;
    protocol_error(*worker.conn,
                   fmt::format("result for chunk {} of job {} that was not assigned to this worker",
                               chunk, job_id));
    return;
  }
  uint64_t finished = 0;
  for (auto r : batch.getResults())
    if (job.finish(r.getChunk(), worker.id, from_wire(r))) ++finished;
  worker.in_flight.remove(job_id, finished);
  worker.chunks_done += finished;
  worker.bytes_reduced += finished * chunk_bytes;
  counters_.tasks_done += finished;
  counters_.bytes_reduced += finished * chunk_bytes;
  bool requeued = false;
  for (auto f : batch.getFailures()) {
    const uint64_t chunk = f.getChunk();
    if (chunk >= job.chunks() || job.state(chunk) != TaskState::kRunning ||
        job.running_on(chunk) != worker.id)
      continue;
    worker.in_flight.remove(job_id, 1);
    ++counters_.tasks_failed;
    const std::string message = printable(f.getMessage().cStr(), 1000);
    spdlog::warn("job {} chunk {} failed on worker '{}': {}", job_id, chunk, worker.name, message);
    const uint32_t failures = job.requeue(chunk, worker.id, worker.name, /*blame=*/true);
    ++counters_.tasks_requeued;
    requeued = true;
    if (failures >= config_.allowed_failures) {
      fail_job(job, fmt::format("chunk {} failed {} times (on {}); last error: {}", chunk, failures,
                                fmt::join(distinct(job.failed_on(chunk)), ", "), message));
      dispatch();
      return;
    }
  }
  if (job.complete()) {
    complete_job(job);
  } else {
    send_progress(job, /*force=*/false);
  }
  if (requeued) {
    dispatch();
  } else {
    dispatch_to(worker);
  }
}

void Scheduler::send_progress(Job& job, bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - job.last_progress < std::chrono::milliseconds(50)) return;
  job.last_progress = now;
  auto cit = clients_.find(job.client());
  if (cit == clients_.end()) return;
  capnp::MallocMessageBuilder m(256 + job.unsent_partials.size() * 8);
  auto p = m.initRoot<wire::Message>().initProgress();
  p.setJobId(job.id());
  p.setChunksDone(job.done());
  p.setChunksTotal(job.chunks());
  p.setRunningSum(job.running_sum());
  if (!job.unsent_partials.empty()) {
    auto list = p.initPartials(uint32_t(job.unsent_partials.size()));
    for (size_t i = 0; i < job.unsent_partials.size(); ++i) {
      const uint64_t chunk = job.unsent_partials[i];
      to_wire(chunk, job.partial(chunk), list[uint32_t(i)]);
    }
    job.unsent_partials.clear();
  }
  cit->second->conn->send(m);
}

void Scheduler::complete_job(Job& job) {
  send_progress(job, /*force=*/true);
  const PartialSum total = job.result();
  ++counters_.jobs_completed;
  spdlog::info("job {} done: {} chunks in {:.3f} s on {} workers, sum {:.17g}, count {}", job.id(),
               job.chunks(), job.seconds(), job.workers_used(), total.sum, total.count);
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    send_message(*cit->second->conn, [&](wire::Message::Builder m) {
      auto r = m.initJobResult();
      r.setJobId(job.id());
      r.setSum(total.sum);
      r.setCount(total.count);
      r.setMin(total.min);
      r.setMax(total.max);
      r.setChunks(job.chunks());
      r.setWorkers(uint32_t(job.workers_used()));
      r.setSeconds(job.seconds());
      r.setRetries(job.retries());
    });
  }
  remember_job(job, "done", "");
  forget_job(job);
}

void Scheduler::fail_job(Job& job, const std::string& message) {
  ++counters_.jobs_failed;
  spdlog::warn("job {} failed: {}", job.id(), message);
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) {
    send_message(*cit->second->conn, [&](wire::Message::Builder m) {
      auto f = m.initJobFailed();
      f.setJobId(job.id());
      f.setMessage(message);
    });
  }
  remember_job(job, "failed", message);
  forget_job(job);
}

void Scheduler::cancel_job(JobId id) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return;
  ++counters_.jobs_cancelled;
  spdlog::info("job {} cancelled ({} of {} chunks done)", id, it->second->done(),
               it->second->chunks());
  remember_job(*it->second, "cancelled", "cancelled by its client, or its client left");
  forget_job(*it->second);
  dispatch();
}

void Scheduler::forget_job(Job& job) {
  const JobId id = job.id();
  capnp::MallocMessageBuilder m(32);
  m.initRoot<wire::Message>().initDropJob().setJobId(id);
  for (auto& [wid, w] : workers_) {
    if (w->defined_jobs.erase(id)) w->conn->send(m);
    // The worker forgets the job's queued chunks; the running ones report and are dropped.
    w->in_flight.forget_job(id);
  }
  auto cit = clients_.find(job.client());
  if (cit != clients_.end()) cit->second->jobs.erase(id);
  jobs_.erase(id);  // destroys `job`
}

void Scheduler::remember_job(const Job& job, const char* state, const std::string& message) {
  JobSummary s;
  s.id = job.id();
  auto cit = clients_.find(job.client());
  s.client = cit != clients_.end() ? cit->second->name : fmt::format("client {}", job.client());
  s.description = describe(*job.spec());
  s.state = state;
  s.message = message.substr(0, 1000);
  s.chunks = job.chunks();
  s.chunks_done = job.done();
  s.bytes = job.spec()->bytes();
  s.retries = job.retries();
  s.workers = uint32_t(job.workers_used());
  s.seconds = job.seconds();
  if (job.complete()) {
    const PartialSum total = job.result();
    s.sum = total.sum;
    s.count = total.count;
  } else {
    s.sum = job.running_sum();
  }
  recent_jobs_.push_front(std::move(s));
  if (recent_jobs_.size() > kRecentJobs) recent_jobs_.pop_back();
}

void Scheduler::remove_worker(WorkerId id, const std::string& why, bool graceful) {
  auto it = workers_.find(id);
  if (it == workers_.end()) return;
  std::unique_ptr<WorkerRecord> w = std::move(it->second);
  workers_.erase(it);
  spdlog::info("worker {} '{}' {}: {} ({} chunks in flight re-queued)", id, w->name,
               graceful ? "left" : "lost", why, w->in_flight.size());
  std::vector<std::pair<JobId, std::string>> to_fail;
  for (const auto& [job_id, held] : w->in_flight.by_job()) {
    auto jit = jobs_.find(job_id);
    if (jit == jobs_.end()) continue;
    Job& job = *jit->second;
    for (const uint64_t chunk : job.running_chunks_of(id)) {
      const uint32_t failures = job.requeue(chunk, id, w->name, /*blame=*/!graceful);
      ++counters_.tasks_requeued;
      if (!graceful && failures >= config_.allowed_failures)
        to_fail.emplace_back(job_id, fmt::format(
                                       "chunk {} was lost {} times with workers that died ({})",
                                       chunk, failures,
                                       fmt::join(distinct(job.failed_on(chunk)), ", ")));
    }
  }
  for (auto& [job_id, message] : to_fail) {
    auto jit = jobs_.find(job_id);
    if (jit != jobs_.end()) fail_job(*jit->second, message);
  }
  if (!shutting_down_) dispatch();
}

void Scheduler::send_cluster_info(ClientRecord& client, uint64_t tag) {
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto info = m.initClusterInfo();
    info.setTag(tag);
    info.setSchedulerVersion(PSCHED_VERSION);
    auto list = info.initWorkers(uint32_t(workers_.size()));
    uint32_t i = 0;
    for (auto& [id, w] : workers_) {
      auto o = list[i++];
      o.setId(id);
      o.setName(w->name);
      o.setHost(w->host);
      o.setPid(w->pid);
      o.setBackend(w->backend);
      o.setDeviceName(w->device_name);
      o.setMemoryTotalBytes(w->memory_total_bytes);
      o.setMemoryLimitBytes(w->memory_limit_bytes);
      o.setComputeMajor(w->compute_major);
      o.setComputeMinor(w->compute_minor);
      o.setThreads(w->threads);
      o.setSlots(w->slots);
      o.setWindowElements(w->window_elements);
      o.setChunksDone(w->chunks_done);
      o.setBytesReduced(w->bytes_reduced);
    }
  });
}

void Scheduler::shutdown(const std::string& reason, std::function<void()> on_drained) {
  if (shutting_down_) return;
  shutting_down_ = true;
  on_drained_ = std::move(on_drained);
  spdlog::info("shutting down: {}", reason);
  boost::system::error_code ec;
  acceptor_.close(ec);
  heartbeat_timer_.cancel();
  while (!jobs_.empty()) fail_job(*jobs_.begin()->second, reason);
  capnp::MallocMessageBuilder m(64);
  m.initRoot<wire::Message>().initGoodbye().setReason(reason);
  for (auto& [id, w] : workers_) {
    w->conn->send(m);
    w->conn->close_when_flushed();
  }
  for (auto& [id, c] : clients_) {
    c->conn->send(m);
    c->conn->close_when_flushed();
  }
  if (!config_.scheduler_file.empty()) std::remove(config_.scheduler_file.c_str());
  if (connections_ == 0 && on_drained_) asio::post(io_, std::move(on_drained_));
}

}  // namespace psched
