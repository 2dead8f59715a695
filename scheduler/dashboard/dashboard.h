// Dashboard: psched's read-only HTTP face on --dashboard-address (default :8787), served with
// Boost.Beast on the scheduler's own event loop: / (status page), /api/status (JSON), /metrics
// (Prometheus text format), /health. It only reads the Scheduler's state.
#pragma once

#include <boost/asio.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace psched {

class Scheduler;

// Where the dashboard listens: "none" (disabled), ":PORT", "HOST:PORT", "[V6]:PORT" or "HOST"
// (port 8787). An empty host means all interfaces.
struct DashboardAddress {
  bool enabled = true;
  std::string host;
  uint16_t port = 8787;
};
StatusOr<DashboardAddress> parse_dashboard_address(const std::string& text);

class Dashboard {
 public:
  // HTTP connections kept at once: the oldest goes when a new one comes (a descriptor each).
  static constexpr size_t kMaxSessions = 128;

  Dashboard(boost::asio::io_context& io, const Scheduler& scheduler);
  ~Dashboard();

  // address: "none" (disabled), ":PORT", "HOST:PORT" or "HOST" (port 8787); port 0 picks one.
  Status start(const std::string& address);
  void stop();
  uint16_t port() const;
  std::string url() const;  // http://host:port (https:// with TLS), or "" when disabled
  // SIGHUP: the scheduler's reloaded certificate and token, for new requests from now on (a new
  // token also signs browsers out: their session was made for the old one).
  void reload_credentials();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace psched
