// Workers and clients once their Hello is in: a Hello refused (shutting down, another protocol
// version, a wrong token, too many connections), a worker's or client's record made on admission
// (what a Hello may claim is bounded here, totals are psched's own), and what each role may say
// after it. A connection's life around this (accept, Hello's routing, close, heartbeat, shutdown) is
// scheduler.cpp's.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "app/logging.h"
#include "core/plural.h"
#include "net/token.h"
#include "net/wire_convert.h"
#include "scheduler/scheduler.h"

namespace psched {

bool Scheduler::refused_hello(FramedConnection& conn, wire::Hello::Reader hello) {
  if (shutting_down_) {
    conn.send_error_and_close("scheduler shutting down");
    return true;
  }
  if (hello.getProtocolVersion() != wire::PROTOCOL_VERSION) {
    protocol_error(conn, fmt::format("protocol version mismatch: scheduler speaks {}, peer speaks {} "
                                     "(run one psched release on every node)",
                                     wire::PROTOCOL_VERSION, hello.getProtocolVersion()));
    return true;
  }
  if (!config_.token.empty()) {
    if (!hello.hasToken() || hello.getToken().size() == 0) {
      protocol_error(conn, "this scheduler requires a token (--token-file or PSCHED_TOKEN)");
      return true;
    }
    const auto token = hello.getToken();  // all its bytes: a NUL must not end the comparison early
    if (!same_token(std::string_view(token.begin(), token.size()), config_.token)) {
      protocol_error(conn, "invalid token");
      return true;
    }
  }
  if (workers_.size() + clients_.size() >= config_.max_connections) {
    ++counters_.connections_refused;
    connection_refusals_.warn(fmt::format("refusing connection from {}: {} connections already open",
                                          conn.remote(), workers_.size() + clients_.size()));
    conn.send_error_and_close(fmt::format("scheduler has too many connections ({})", config_.max_connections));
    return true;
  }
  return false;
}

void Scheduler::admit_worker(const std::shared_ptr<FramedConnection>& conn, WorkerId id, const std::string& name,
                             wire::WorkerInfo::Reader info) {
  auto w = std::make_unique<WorkerRecord>();
  static_cast<WorkerInfo&>(*w) = from_wire(info);
  w->id = id;
  w->name = name;
  w->host = printable(w->host, 256);
  w->backend = printable(w->backend, 32);
  w->device_name = printable(w->device_name, 256);
  w->cpu_affinity = printable(w->cpu_affinity, 256);
  w->gpu.reset();  // GPU health comes from heartbeats only, checked there (performance.cpp)
  w->slots = std::clamp<uint32_t>(w->slots, 1, 4096);
  w->readers = std::min<uint32_t>(w->readers, 4096);
  // Totals are ours to count, whatever the Hello said.
  w->chunks_done = 0;
  w->bytes_reduced = 0;
  w->busy_seconds = 0;
  w->conn = conn;
  dispatcher_.worker_joined(*w);
  conn->set_idle_timeout(std::chrono::milliseconds(config_.worker_timeout_ms), watchdog_);
  if (w->backend == "cuda") {
    spdlog::info("worker {} '{}' joined from {}: cuda {} (sm_{}{}), {:.1f} GiB, window {} (+{} reading)", id,
                 name, conn->remote(), w->device_name, w->compute_major, w->compute_minor,
                 double(w->memory_total_bytes) / double(1ull << 30), w->slots, w->readers);
  } else {
    spdlog::info("worker {} '{}' joined from {}: {} {}, window {}", id, name, conn->remote(), w->backend,
                 counted(w->threads, "thread"), w->slots);
  }
  const bool first = workers_.empty();
  workers_[id] = std::move(w);
  if (first && !jobs_.empty()) tell_clients_about_workers();  // the waiting jobs go on
}

void Scheduler::admit_client(const std::shared_ptr<FramedConnection>& conn, ClientId id, const std::string& name) {
  auto c = std::make_unique<ClientRecord>();
  c->id = id;
  c->name = name;
  c->conn = conn;
  conn->set_idle_timeout(std::chrono::milliseconds(config_.client_timeout_ms), watchdog_);
  conn->set_max_unsent_bytes(config_.max_client_unsent_bytes);
  conn->count_unsent_into(client_unsent_);
  spdlog::debug("client {} '{}' connected from {}", id, name, conn->remote());
  clients_[id] = std::move(c);
}

void Scheduler::on_worker_message(WorkerRecord& worker, wire::Message::Reader message) {
  switch (message.which()) {
    case wire::Message::HEARTBEAT:
      worker.memory_used_bytes = message.getHeartbeat().getMemoryUsedBytes();
      if (message.getHeartbeat().hasGpu()) on_gpu_health(worker, message.getHeartbeat().getGpu());
      return;
    case wire::Message::RESULT_BATCH:
      on_results(worker, message.getResultBatch());
      return;
    case wire::Message::GOODBYE: {
      auto conn = worker.conn;
      remove_worker(worker.id,
                    fmt::format("leaving: {}", printable(message.getGoodbye().getReason().cStr())), Loss::kLeft);
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
      if (client.jobs.count(id)) {
        cancel_job(id);
      } else if (jobs_.count(id)) {  // not ours to cancel; an unknown id may be its own job, just ended
        send_message(*client.conn, [&](wire::Message::Builder m) {
          auto e = m.initError();
          e.setMessage(fmt::format("job {} is another client's: not cancelled", id));
          e.setJobId(id);
        });
      }
      return;
    }
    case wire::Message::CLUSTER_INFO_REQUEST:
      send_cluster_info(client, message.getClusterInfoRequest().getTag());
      return;
    case wire::Message::BURN_STATUS:
      on_burn_status(client, message.getBurnStatus());
      return;
    case wire::Message::GOODBYE:
      client.conn->close_when_flushed();
      return;
    default:
      protocol_error(*client.conn, fmt::format("unexpected message kind {} from a client",
                                               unsigned(message.which())));
  }
}

void Scheduler::on_burn_status(ClientRecord& client, wire::BurnStatus::Reader burn) {
  StatusOr<BurnStatus> status = burn_status_from_wire(burn);
  Status kept = status ? burns_.update(client.id, client.name, std::move(status.value())) : status.status();
  if (kept) return;
  // The client's mistake, not the connection's: it may send a good one next; its jobs go on.
  spdlog::warn("client {} '{}': {}", client.id, client.name, printable(kept.message(), 1000));
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto e = m.initError();
    e.setMessage(kept.message());
    e.setRefused(true);
  });
}

void Scheduler::send_cluster_info(ClientRecord& client, uint64_t tag) {
  send_message(*client.conn, [&](wire::Message::Builder m) {
    auto info = m.initClusterInfo();
    info.setTag(tag);
    info.setSchedulerVersion(PSCHED_VERSION);
    auto list = info.initWorkers(uint32_t(workers_.size()));
    uint32_t i = 0;
    for (auto& [id, w] : workers_) to_wire(*w, list[i++]);
  });
}

}  // namespace psched
