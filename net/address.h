// Scheduler addresses as users write them: tcp://host:port, tls://host:port (TLS, net/tls.h),
// host:port, host (port 8786), with IPv6 in brackets ([::1]:8786). Parsing never resolves; resolution happens where the connection is made.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace psched {

constexpr uint16_t kDefaultSchedulerPort = 8786;
constexpr uint16_t kDefaultDashboardPort = 8787;

// What the address says of the transport: nothing (host:port), tcp:// or tls://.
enum class Scheme : uint8_t { kUnspecified, kTcp, kTls };

struct Address {
  std::string host;
  uint16_t port = kDefaultSchedulerPort;
  Scheme scheme = Scheme::kUnspecified;
  std::string to_string() const;  // tls://host:port for kTls, else tcp://host:port
};

StatusOr<Address> parse_address(const std::string& text, uint16_t default_port = kDefaultSchedulerPort);

}  // namespace psched
