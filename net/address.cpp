#include "net/address.h"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

namespace psched {

std::string Address::to_string() const {
  const char* prefix = scheme == Scheme::kTls ? "tls" : "tcp";
  if (host.find(':') != std::string::npos) return fmt::format("{}://[{}]:{}", prefix, host, port);
  return fmt::format("{}://{}:{}", prefix, host, port);
}

StatusOr<Address> parse_address(const std::string& text, uint16_t default_port) {
  auto bad = [&](const char* why) {
    return Status::invalid(fmt::format("invalid address '{}': {} (expected tcp://HOST:PORT, "
                                       "tls://HOST:PORT, HOST:PORT or HOST)", text, why));
  };
  std::string rest = text;
  Address a;
  if (rest.rfind("tcp://", 0) == 0) {
    rest = rest.substr(6);
    a.scheme = Scheme::kTcp;
  } else if (rest.rfind("tls://", 0) == 0) {
    rest = rest.substr(6);
    a.scheme = Scheme::kTls;
  } else if (rest.find("://") != std::string::npos) {
    return bad("only tcp:// and tls:// are supported");
  }
  if (rest.empty()) return bad("no host");
  a.port = default_port;
  std::string port_text;
  if (rest[0] == '[') {
    const size_t close = rest.find(']');
    if (close == std::string::npos) return bad("unclosed '['");
    a.host = rest.substr(1, close - 1);
    const std::string after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return bad("expected ':' after ']'");
      port_text = after.substr(1);
      if (port_text.empty()) return bad("empty port");
    }
  } else {
    const size_t colon = rest.find(':');
    if (colon != std::string::npos && rest.find(':', colon + 1) != std::string::npos)
      return bad("IPv6 addresses go in brackets, e.g. [::1]:8786");
    a.host = rest.substr(0, colon);
    if (colon != std::string::npos) {
      port_text = rest.substr(colon + 1);
      if (port_text.empty()) return bad("empty port");
    }
  }
  if (a.host.empty()) return bad("no host");
  for (char c : a.host) {
    const bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                    c == '_' || c == ':' || c == '%';
    if (!ok) return bad("bad character in host");
  }
  if (a.host.size() > 253) return bad("host name too long");
  if (!port_text.empty()) {
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size() || value > 65535)
      return bad("port must be a number from 0 to 65535");
    a.port = uint16_t(value);
  }
  return a;
}

}  // namespace psched
