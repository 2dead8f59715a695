#include "http_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

namespace psched::test {

uint16_t port_of(const std::string& url) {
  const size_t colon = url.rfind(':');
  if (colon == std::string::npos) throw std::runtime_error("no port in '" + url + "'");
  return uint16_t(std::stoi(url.substr(colon + 1)));
}

int connect_loopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  return fd;
}

bool send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return true;
}

std::string read_until_closed(int fd, int timeout_ms, bool* closed) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::string out;
  if (closed) *closed = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, int(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return out;
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {  // EOF or reset
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, size_t(n));
  }
}

HttpReply http_exchange(uint16_t port, const std::string& bytes, int timeout_ms) {
  const int fd = connect_loopback(port);
  send_all(fd, bytes);  // the server may answer and close before taking everything
  const std::string raw = read_until_closed(fd, timeout_ms);
  ::close(fd);
  HttpReply reply;
  const size_t end = raw.find("\r\n\r\n");
  reply.head = raw.substr(0, end);
  if (end != std::string::npos) reply.body = raw.substr(end + 4);
  if (raw.rfind("HTTP/1.1 ", 0) == 0 && raw.size() >= 12)
    reply.status = std::stoi(raw.substr(9, 3));
  return reply;
}

HttpReply http_request(uint16_t port, const std::string& method, const std::string& target) {
  return http_exchange(port, method + " " + target +
                            " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
}

}  // namespace psched::test
