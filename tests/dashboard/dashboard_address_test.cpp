// --dashboard-address as users write it: none, :PORT, HOST:PORT, [V6]:PORT, HOST.
#include <catch2/catch.hpp>

#include "scheduler/dashboard/dashboard.h"

using psched::parse_dashboard_address;

TEST_CASE("'none' disables the dashboard") {
  auto a = parse_dashboard_address("none");
  REQUIRE(a);
  CHECK_FALSE(a->enabled);
}

TEST_CASE("':PORT' listens on every interface") {
  auto a = parse_dashboard_address(":9100");
  REQUIRE(a);
  CHECK(a->enabled);
  CHECK(a->host.empty());
  CHECK(a->port == 9100);
  auto any = parse_dashboard_address(":0");
  REQUIRE(any);
  CHECK(any->port == 0);
}

TEST_CASE("'HOST:PORT', '[V6]:PORT' and 'HOST' name the interface, port 8787 by default") {
  auto a = parse_dashboard_address("127.0.0.1:8000");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 8000);
  auto v6 = parse_dashboard_address("[::1]:8001");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  CHECK(v6->port == 8001);
  auto host = parse_dashboard_address("head-node");
  REQUIRE(host);
  CHECK(host->host == "head-node");
  CHECK(host->port == 8787);
}

TEST_CASE("bad dashboard addresses are refused with the value and the accepted forms") {
  for (const char* bad : {"", ":", ":70000", ":80x", "host:port", "a b:80", "ftp://x:1"}) {
    auto a = parse_dashboard_address(bad);
    INFO("address '" << bad << "'");
    REQUIRE_FALSE(a);
    CHECK(a.message().find(std::string("invalid --dashboard-address '") + bad + "'") == 0);
    CHECK(a.message().find("expected none, :PORT, HOST:PORT or HOST") != std::string::npos);
  }
}
