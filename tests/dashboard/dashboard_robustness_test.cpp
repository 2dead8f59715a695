// Hostile HTTP clients on the dashboard port: junk, oversized request lines and headers, too many
// connections, a client that never finishes its request. Each is refused or cut off, and the
// scheduler keeps running jobs exactly meanwhile.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <chrono>
#include <random>

#include "dashboard_helpers.h"

using namespace psched::test;

namespace {

// The scheduler still does its job: an exact arange sum over 24 chunks.
void check_scheduler_serves(TestCluster& cluster) {
  pclient::Result result = cluster.client().run(arange_sum_job(300, 400, 50, 100));
  CHECK(result.sum == arange_sum(120000));
  CHECK(result.count == 120000);
  CHECK(process_alive(cluster.scheduler_pid()));
}

}  // namespace

TEST_CASE("junk bytes on the dashboard port get 400 and the scheduler keeps serving") {
  auto cluster = dashboard_cluster({"dash-a"});
  const uint16_t port = port_of(cluster->dashboard());
  std::mt19937 random(42);
  std::string junk(4096, '\0');
  for (char& c : junk) c = char(random());
  HttpReply r = http_exchange(port, junk + "\r\n\r\n");
  CHECK((r.status == 400 || r.status == 0));
  CHECK(http_exchange(port, "HELLO\r\n\r\n").status == 400);
  CHECK(http_exchange(port, "GET / HTTP/9.9\r\n\r\n").status == 400);
  check_scheduler_serves(*cluster);
  CHECK(http_request(port, "GET", "/health").status == 200);
}

TEST_CASE("a 100 KB request line or 20 KB of headers get 431 and the scheduler keeps serving") {
  auto cluster = dashboard_cluster({"dash-a"});
  const uint16_t port = port_of(cluster->dashboard());
  const std::string long_target = "/" + std::string(100 * 1024, 'a');
  HttpReply line = http_exchange(port, "GET " + long_target + " HTTP/1.1\r\n\r\n");
  // The server answers once 8 KiB are in; the rest may still be in flight when it closes.
  CHECK((line.status == 431 || line.status == 0));
  std::string headers = "GET /health HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 200; ++i)
    headers += "X-Filler-" + std::to_string(i) + ": " + std::string(90, 'b') + "\r\n";
  HttpReply big = http_exchange(port, headers + "\r\n");
  CHECK((big.status == 431 || big.status == 0));
  HttpReply body =
      http_exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
  CHECK(body.status == 413);
  check_scheduler_serves(*cluster);
  CHECK(http_request(port, "GET", "/health").status == 200);
}

TEST_CASE("hundreds of idle connections neither block the dashboard nor the scheduler") {
  auto cluster = dashboard_cluster({"dash-a"});
  const uint16_t port = port_of(cluster->dashboard());
  std::vector<int> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(connect_loopback(port));
  // The oldest idle connections are let go to make room; the newest request is served.
  HttpReply health = http_request(port, "GET", "/health");
  CHECK(health.status == 200);
  check_scheduler_serves(*cluster);
  for (int fd : idle) ::close(fd);
  CHECK(http_request(port, "GET", "/api/status").status == 200);
}

TEST_CASE("a client that never finishes its request is cut off after the request timeout") {
  auto cluster = dashboard_cluster({"dash-a"});
  const uint16_t port = port_of(cluster->dashboard());
  const auto start = std::chrono::steady_clock::now();
  const int slow = connect_loopback(port);
  REQUIRE(send_all(slow, "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
  // Meanwhile everyone else is served.
  check_scheduler_serves(*cluster);
  CHECK(http_request(port, "GET", "/health").status == 200);
  bool closed = false;
  const std::string got = read_until_closed(slow, 20000, &closed);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(slow);
  CHECK(closed);
  CHECK(got.empty());
  CHECK(waited > 5.0);   // the server waited for the request ...
  CHECK(waited < 15.0);  // ... about 10 s, not forever
}
