// A connection's life in psched: the listener and accept (connections before Hello have their own
// limit, admission.h), a frame routed by who sent it, Hello turning a connection into a worker or a
// client (who is refused and what each role may say is registration.cpp's), the heartbeat, a close
// and what it costs, and shutdown.
#include "scheduler/scheduler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "app/logging.h"
#include "core/check.h"
#include "net/address.h"
#include "net/scheduler_file.h"

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
  std::optional<PendingConnections::Entry> pending;  // while kNew
};

namespace {

// Largest frame before a peer's Hello is accepted (a Hello is well under 8 KiB): an unauthenticated
// connection cannot make us buffer --max-frame bytes.
constexpr uint32_t kMaxHelloFrameBytes = 64u << 10;

}  // namespace

Scheduler::Scheduler(asio::io_context& io, SchedulerConfig config)
    : io_(io),
      config_(std::move(config)),
      acceptor_(io),
      heartbeat_timer_(io),
      watchdog_(std::make_shared<LoopWatchdog>(io)) {
  config_.heartbeat_ms = heartbeat_ms_for(config_.worker_timeout_ms, config_.heartbeat_ms);
  client_unsent_->limit = config_.max_total_unsent_bytes;
  client_unsent_->on_over = [this, alive = std::weak_ptr<int>(alive_)] {
    if (!alive.expired()) cut_slowest_readers();
  };
}

Scheduler::~Scheduler() { client_unsent_->on_over = nullptr; }

std::string Scheduler::address() const {
  std::string host = config_.host;
  if (host.empty() || host == "0.0.0.0" || host == "::") {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "127.0.0.1";
  }
  return Address{host, port_, config_.tls ? Scheme::kTls : Scheme::kTcp}.to_string();
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
  if (config_.tls) spdlog::info("TLS is on: every peer must present a certificate signed by the cluster CA");
  if (!config_.token.empty()) spdlog::info("token authentication is on");
  accept();
  heartbeat();
  watchdog_->start([](double seconds) {
    spdlog::warn("psched's event loop did not run for {:.1f} s (stopped, paused or starved): what "
                 "peers sent meanwhile is read first, and their silence is counted from now",
                 seconds);
  });
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
          std::move(socket), std::min(config_.max_frame_bytes, kMaxHelloFrameBytes),
          Transport{config_.tls, TlsRole::kServer});
      peer->conn = conn;
      peer->remote = conn->remote();
      // Connections before Hello have their own limit: past it the oldest makes room, so silent
      // connections cannot keep a real peer out (admission.h).
      if (before_hello_.size() >= config_.admission.max_pending_connections) {
        if (auto oldest = before_hello_.oldest()) {
          ++counters_.connections_refused;
          connection_refusals_.warn(fmt::format(
              "closing {}: {} connections have not said Hello yet (the oldest makes room)",
              oldest->remote(), before_hello_.size()));
          oldest->send_error_and_close("closed: too many connections waiting to say Hello");
        }
      }
      ++connections_;
      peer->pending = before_hello_.add(conn);
      conn->start({[this, peer](wire::Message::Reader m) { on_message(peer, m); },
                   [this, peer](const std::string& why) { on_close(peer, why); },
                   [this, peer] { on_frames_handled(*peer); }});
      conn->set_idle_timeout(std::chrono::milliseconds(config_.handshake_timeout_ms), watchdog_);
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

void Scheduler::reload_credentials(std::shared_ptr<asio::ssl::context> tls,
                                   std::shared_ptr<asio::ssl::context> dashboard_tls, std::string token) {
  config_.tls = std::move(tls);
  config_.dashboard_tls = std::move(dashboard_tls);
  config_.token = std::move(token);
}

void Scheduler::heartbeat() {
  if (shutting_down_) return;
  OutgoingMessage m(16);
  m.initRoot<wire::Message>().initHeartbeat();
  for (auto& [id, w] : workers_) {
    send_owed_drops(*w);
    w->conn->send(m);
  }
  for (auto& [id, c] : clients_) c->conn->send(m);
  if (workers_.empty()) {
    for (auto& [id, job] : jobs_) send_progress(*job, /*force=*/true);  // still no workers
  }
  check_stalls();
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

void Scheduler::protocol_error(const WorkerRecord& worker, const std::string& message) {
  ++counters_.protocol_errors;
  spdlog::warn("worker {} '{}' ({}) disconnected: {}", worker.id, worker.name, worker.conn->remote(), message);
  worker.conn->send_error_and_close(message);
}

void Scheduler::on_message(const std::shared_ptr<Peer>& peer, wire::Message::Reader message) {
  switch (peer->kind) {
    case Peer::Kind::kNew:
      // Closed before Hello (on_close ran: made room for newer connections, or refused): its
      // socket is read until our Error is flushed, but nothing it says is heard. Its Hello, read
      // after the close, once reached on_hello with no pending entry and crashed psched; the
      // connection drops such frames now (FramedConnection::Handlers::on_close), and this stays
      // the check before on_hello's use of the entry.
      if (!peer->pending) return;
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

void Scheduler::on_frames_handled(const Peer& peer) {
  if (peer.kind != Peer::Kind::kWorker) return;
  auto it = workers_.find(peer.id);
  if (it == workers_.end() || !it->second->top_up_owed) return;
  it->second->top_up_owed = false;
  const auto now = std::chrono::steady_clock::now();
  dispatcher_.burst_handled(*it->second, now);
  dispatch_to(*it->second);
  dispatcher_.burst_topped_up(*it->second, now);
}

void Scheduler::on_close(const std::shared_ptr<Peer>& peer, const std::string& why) {
  --connections_;
  if (peer->pending) {
    before_hello_.remove(*peer->pending);
    peer->pending.reset();
  }
  if (shutting_down_ && connections_ == 0 && on_drained_) asio::post(io_, std::move(on_drained_));
  switch (peer->kind) {
    case Peer::Kind::kNew: {
      const auto conn = peer->conn.lock();
      if (conn && conn->refused_by_tls()) {
        ++counters_.connections_refused;
        tls_refusals_.warn(fmt::format("{}: refused: {}", peer->remote, why));
      } else if (conn && conn->sent_error()) {
        // Refused by the connection itself (an oversize or malformed frame): said to the peer,
        // logged here like every refusal.
        connection_refusals_.warn(fmt::format("{}: refused before Hello: {}", peer->remote, why));
      } else {
        spdlog::debug("{}: closed before Hello: {}", peer->remote, why);
      }
      return;
    }
    case Peer::Kind::kWorker: {
      // Closed by psched for a protocol error (protocol_error): the peer misbehaved, so the chunks
      // it held are retried unblamed; else it was lost (killed, cut off, timed out).
      const auto conn = peer->conn.lock();
      remove_worker(peer->id, why, conn && conn->sent_error() ? Loss::kThrownOff : Loss::kLost);
      return;
    }
    case Peer::Kind::kClient: {
      auto it = clients_.find(peer->id);
      if (it == clients_.end()) return;
      const std::set<JobId> jobs = it->second->jobs;
      spdlog::info("client {} ({}) left: {}", it->second->name, peer->remote, why);
      clients_.erase(it);
      burns_.drop(peer->id);
      for (JobId job : jobs) cancel_job(job);
      return;
    }
  }
}

void Scheduler::on_hello(const std::shared_ptr<Peer>& peer, wire::Hello::Reader hello) {
  const std::shared_ptr<FramedConnection> conn = peer->conn.lock();
  if (!conn || refused_hello(*conn, hello)) return;
  const auto role = hello.getRole();
  if (role != wire::Role::WORKER && role != wire::Role::CLIENT) {
    protocol_error(*conn, "unknown role in Hello");
    return;
  }
  before_hello_.remove(*peer->pending);
  peer->pending.reset();
  peer->id = next_peer_id_++;
  const std::string name = hello.hasName() && hello.getName().size() > 0
                               ? printable(hello.getName().cStr(), kMaxPeerNameBytes)
                               : fmt::format("peer-{}", peer->id);
  if (role == wire::Role::WORKER) {
    peer->kind = Peer::Kind::kWorker;
    admit_worker(conn, peer->id, name, hello.getWorker());
  } else {
    peer->kind = Peer::Kind::kClient;
    admit_client(conn, peer->id, name);
  }
  conn->set_max_frame_bytes(config_.max_frame_bytes);
  send_message(*conn, [&](wire::Message::Builder m) {
    auto welcome = m.initWelcome();
    welcome.setProtocolVersion(wire::PROTOCOL_VERSION);
    welcome.setPeerId(peer->id);
    welcome.setHeartbeatMs(config_.heartbeat_ms);
    welcome.setSchedulerVersion(PSCHED_VERSION);
    welcome.setMaxFrameBytes(config_.max_frame_bytes);
  });
  if (peer->kind == Peer::Kind::kWorker) dispatch_to(*must_find(workers_, peer->id));
}

void Scheduler::shutdown(const std::string& reason, std::function<void()> on_drained) {
  if (shutting_down_) return;
  shutting_down_ = true;
  on_drained_ = std::move(on_drained);
  spdlog::info("shutting down: {}", reason);
  boost::system::error_code ec;
  acceptor_.close(ec);
  heartbeat_timer_.cancel();
  watchdog_->stop();
  while (!jobs_.empty()) fail_job(*jobs_.begin()->second, reason);
  OutgoingMessage m(64);
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
