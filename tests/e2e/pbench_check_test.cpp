// pbench --check as a user sees it: a correct near-zero sum passes, an overflowing job is refused
// before it runs, and an empty selection says it is empty instead of printing a mean of 0.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("an arange job whose exact sum is near zero passes --check", "[pbench][check]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-c", "1", "-x", "4000", "-y", "4000", "--generator",
                                  "arange", "--start", "-799999.95", "--step", "0.1", "--offset", "0",
                                  "--row-step", "1", "--col-step", "1", "--check", "--json"},
                                 &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["check"] == "ok");
  CHECK(std::fabs(j["sum"].get<double>()) < 1.0);
}

TEST_CASE("a job whose sum would overflow float64 is refused before it runs", "[pbench][check]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-c", "1", "-x", "400", "-y", "400", "--chunk-x",
                                  "100", "--chunk-y", "100", "--scale", "1e308", "--check", "--json"},
                                 &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) != 0);
  CHECK(out.find("past float64's largest value") != std::string::npos);
  CHECK(out.find("\"check\":\"ok\"") == std::string::npos);
}

TEST_CASE("an empty selection says so instead of a mean of 0", "[pbench][check]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-c", "1", "-x", "400", "-y", "400", "--chunk-x",
                                  "100", "--chunk-y", "100", "--row-start", "5", "--row-stop", "5", "--json"},
                                 &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["count"] == 0);
  CHECK(j["empty_selection"] == true);
  CHECK(j["mean"].is_null());
}
