// pbench --check as a user sees it: a correct near-zero sum passes, an overflowing job is refused
// before it runs, and an empty selection says it is empty instead of printing a mean of 0.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <string>
#include <vector>

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

// The README's reference values (core/reference_sums.cpp): a normal job in the table checks bit
// for bit in any chunking, and a sum one ulp off fails it. (One chunk's last bit among many is below
// the total's ulp and changes nothing; pbench --verify is what catches that.)
TEST_CASE("a normal job in the reference table passes --check bit for bit, and a one-bit fault fails it",
          "[pbench][check]") {
  const std::vector<std::string> job = {"-x", "2000", "-y", "2000", "--chunk-x", "300", "--chunk-y", "700",
                                        "--check", "--json"};
  std::vector<std::string> argv = {bin_dir() + "/pbench", "-c", "2", "--nthreads", "1"};
  argv.insert(argv.end(), job.begin(), job.end());
  std::string out;
  int status = run_command(argv, &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  auto j = nlohmann::json::parse(out);
  CHECK(j["check"] == "ok");
  CHECK(j["sum"].get<double>() == 0x1.4fbbb6b31aeadp+23);

  // One chunk holding the whole array, and every local worker (they inherit the fault switch)
  // returns its sum one bit off: the job's sum is one ulp off, and --check says so.
  const std::vector<std::string> one_chunk = {"/usr/bin/env", "PSCHED_TEST_FLIP_CHUNK=0", bin_dir() + "/pbench",
                                              "-c", "1", "--nthreads", "1", "-x", "2000", "-y", "2000",
                                              "--chunk-x", "2000", "--chunk-y", "2000", "--check", "--json"};
  status = run_command(one_chunk, &out);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 1);
  j = nlohmann::json::parse(out.substr(0, out.find('\n')));  // then "pbench: check failed: ..."
  CHECK(j["check"].get<std::string>().find("reference value") != std::string::npos);
}
