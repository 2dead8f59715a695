// A deliberately dumb HTTP client for the dashboard tests: raw loopback sockets, so a test can
// send exactly the bytes it wants (well-formed requests, junk, oversized lines, half a request)
// and read whatever comes back until the server closes or a deadline passes.
#pragma once

#include <cstdint>
#include <string>

namespace psched::test {

struct HttpReply {
  int status = 0;       // 0: no parsable status line (closed, reset or timed out)
  std::string head;     // status line and headers
  std::string body;
};

// Port of an http://HOST:PORT URL (the scheduler file's dashboard entry).
uint16_t port_of(const std::string& url);

// A connected loopback socket (or throws); close with ::close.
int connect_loopback(uint16_t port);
// Writes all of `bytes`; false if the peer closed or reset first.
bool send_all(int fd, const std::string& bytes);
// Reads until EOF, reset or timeout_ms; *closed says whether the peer closed (EOF or reset).
std::string read_until_closed(int fd, int timeout_ms, bool* closed = nullptr);

// Sends `bytes` on a fresh connection and returns what came back, parsed.
HttpReply http_exchange(uint16_t port, const std::string& bytes, int timeout_ms = 5000);
// One request with Connection: close.
HttpReply http_request(uint16_t port, const std::string& method, const std::string& target);

}  // namespace psched::test
