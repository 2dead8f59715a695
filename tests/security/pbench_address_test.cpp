// pbench pointed at things that are not a working psched: a port that accepts and never answers, a
// server that sends junk or hangs up, a name that does not resolve, addresses that do not parse.
// Each time: one clear line on stderr and a non-zero exit within seconds.
#include <catch2/catch.hpp>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "abuse_helpers.h"
#include "raw_peer.h"

using namespace psched::test;

namespace {

struct Outcome {
  int status = 0;
  std::string out;
  double seconds = 0;
};

Outcome pbench_at(const std::string& address, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {bin_dir() + "/pbench", "-d", "--scheduler", address, "-x", "100", "-y", "100",
                                   "--chunk-x", "10", "--chunk-y", "10"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Outcome o;
  const auto t0 = std::chrono::steady_clock::now();
  o.status = run_command(argv, &o.out, 30000);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return o;
}

void check_one_clear_line(const Outcome& o, const std::string& says, double within_seconds = 10) {
  INFO(o.out);
  CHECK(WIFEXITED(o.status));
  CHECK(WEXITSTATUS(o.status) == 1);
  CHECK(o.out.rfind("pbench: ", 0) == 0);
  CHECK(o.out.find(says) != std::string::npos);
  CHECK(std::count(o.out.begin(), o.out.end(), '\n') == 1);
  CHECK(o.seconds < within_seconds);
}

std::string at(uint16_t port) { return "tcp://127.0.0.1:" + std::to_string(port); }

}  // namespace

TEST_CASE("pbench at a port that accepts but never answers gives up after --connect-timeout",
          "[security][pbench]") {
  FakeServer mute([](int) {}, /*accept_connections=*/false);
  check_one_clear_line(pbench_at(at(mute.port())),
                       "did not accept us: timed out after 5000 ms waiting for the scheduler's Welcome "
                       "(is a psched scheduler listening there?)");
  const Outcome quick = pbench_at(at(mute.port()), {"--connect-timeout", "500"});
  check_one_clear_line(quick, "timed out after 500 ms", 3);
}

TEST_CASE("pbench at a server that is not psched says so instead of hanging", "[security][pbench]") {
  SECTION("an HTTP server") {
    FakeServer http([](int fd) {
      const std::string reply = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)!write(fd, reply.data(), reply.size());
      char buf[256];
      while (read(fd, buf, sizeof(buf)) > 0) {
      }
    });
    check_one_clear_line(pbench_at(at(http.port())),
                         "frame of 1347703880 bytes exceeds the limit of 16777216 bytes (is a psched scheduler "
                         "listening there?)");
  }
  SECTION("a server that sends well-sized garbage") {
    FakeServer junk([](int fd) {
      std::string reply = length_prefix(16) + std::string(16, '\xee');
      (void)!write(fd, reply.data(), reply.size());
      char buf[256];
      while (read(fd, buf, sizeof(buf)) > 0) {
      }
    });
    check_one_clear_line(pbench_at(at(junk.port())), "malformed message");
  }
  SECTION("a server that hangs up at once") {
    FakeServer rude([](int fd) { shutdown(fd, SHUT_RDWR); });
    check_one_clear_line(pbench_at(at(rude.port())), "did not accept us: connection to the scheduler lost");
  }
}

TEST_CASE("pbench with addresses that do not resolve or parse", "[security][pbench]") {
  check_one_clear_line(pbench_at("tcp://nosuch.invalid:8786"),
                       "cannot connect to scheduler tcp://nosuch.invalid:8786");
  check_one_clear_line(pbench_at("tcp://127.0.0.1:99999"), "port must be a number from 0 to 65535");
  check_one_clear_line(pbench_at("http://127.0.0.1:8786"), "only tcp:// and tls:// are supported");
  check_one_clear_line(pbench_at("tcp://:8786"), "invalid address");
  check_one_clear_line(pbench_at("tcp://a b:1"), "bad character in host");
}
