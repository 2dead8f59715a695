// Clients that do not read what psched pushes to them (a job's streamed partials and Progress are
// sent whether asked for or not) hold psched's memory in their connections' send buffers. Each
// connection cuts its own peer off past --max-client-unsent (net/connection.h); here, all of them
// together are held to --max-total-unsent by cutting off the clients that hold the most, so a
// client that reads keeps its connection and its jobs however many others do not. This runs inside
// the send() that passed the limit (UnsentTotal::on_over), so it changes no table: cut_off() drops
// the buffers at once and tells the scheduler (on_close) later.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "core/check.h"

#include "scheduler/scheduler.h"

namespace psched {

void Scheduler::cut_slowest_readers() {
  // Only open connections count: one already cut off frees its buffers as its socket closes, and
  // counting it could cut off a client that reads.
  std::vector<std::pair<size_t, ClientId>> holders;
  size_t held = 0;
  for (const auto& [id, c] : clients_) {
    if (c->conn->state() != FramedConnection::State::kOpen || c->conn->held_bytes() == 0) continue;
    holders.emplace_back(c->conn->held_bytes(), id);
    held += c->conn->held_bytes();
  }
  std::sort(holders.begin(), holders.end(), std::greater<>());
  const size_t limit = client_unsent_->limit;
  for (const auto& [its, id] : holders) {
    if (held <= limit) return;
    const ClientRecord& client = *must_find(clients_, id);
    const std::string why = fmt::format(
        "not reading: psched holds {} bytes unsent for its clients, over --max-total-unsent {}, and {} of them "
        "for this client, the most",
        held, limit, its);
    spdlog::warn("client {} '{}' ({}) cut off: {}", client.id, client.name, client.conn->remote(), why);
    held -= its;
    client.conn->cut_off(why);  // its buffers freed now; its record and jobs go with on_close, later
  }
}

}  // namespace psched
