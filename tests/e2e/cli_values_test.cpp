// Every integer option of every binary, as a user types it wrong: a negative value or one past 2^64
// must exit non-zero with one line naming the option, the value and the range, never run as a
// wrapped or clamped number.
#include <catch2/catch.hpp>
#include <sys/wait.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "app/exit_codes.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

struct Refusal {
  int status = 0;
  std::string out;
};

Refusal run_with(const std::string& binary, std::vector<std::string> args) {
  args.insert(args.begin(), bin_dir() + "/" + binary);
  Refusal r;
  r.status = run_command(args, &r.out, 15000);
  return r;
}

void check_refused(const std::string& binary, const std::vector<std::string>& args,
                   const std::string& says) {
  const Refusal r = run_with(binary, args);
  INFO(binary << " " << args[0] << " " << args[1] << " -> " << r.out);
  CHECK(WIFEXITED(r.status));
  CHECK(WEXITSTATUS(r.status) == psched::kExitUsage);  // 2, as every binary's bad command line
  CHECK(r.out.find(says) != std::string::npos);
  CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1);
}

const char* kPast64Bits = "18446744073709551616";

}  // namespace

TEST_CASE("every unsigned option of psched, pcuda-worker and pbench refuses -1 and 2^64, naming both",
          "[cli]") {
  const std::vector<std::pair<std::string, std::vector<std::string>>> options = {
      {"psched", {"--port", "--worker-timeout", "--allowed-failures", "--max-frame",
                  "--max-connections", "--max-pending-connections", "--spin-us",
                  "--handshake-timeout", "--max-jobs", "--max-client-jobs"}},
      {"pcuda-worker", {"--nthreads", "--streams", "--nworkers", "--death-timeout", "--spin-us"}},
      {"pbench", {"--gpus", "--cpus", "--rows", "--cols", "--chunk-x", "--chunk-y", "--seed",
                  "--row-step", "--col-step", "--nthreads", "--connect-timeout", "--spin-us",
                  "--repeat"}},
  };
  for (const auto& [binary, names] : options) {
    for (const std::string& name : names) {
      check_refused(binary, {name, "-1"}, name + ": -1 is out of range; expected an integer from ");
      check_refused(binary, {name, kPast64Bits}, name + ": " + kPast64Bits + " is out of range");
      check_refused(binary, {name, "0x10"}, name + ": '0x10' is not a decimal integer");
    }
  }
}

TEST_CASE("pbench's starts and stops take any 64-bit integer and nothing past it", "[cli]") {
  for (const char* name : {"--row-start", "--row-stop", "--col-start", "--col-stop"}) {
    check_refused("pbench", {name, "9223372036854775808"}, std::string(name) + ": 9223372036854775808 is out of range");
    check_refused("pbench", {name, "-9223372036854775809"}, std::string(name) + ": -9223372036854775809 is out of range");
  }
  check_refused("pbench", {"--row-stop", "-600", "-x", "500"},
                "--row-stop: -600 counts back from the end of an axis of 500");
  check_refused("pbench", {"--col-start", "-11", "-y", "10"},
                "--col-start: -11 counts back from the end of an axis of 10");
}

TEST_CASE("an empty scheduler address or file is an error, not the default address", "[cli]") {
  check_refused("pbench", {"--scheduler", "", "-d"}, "--scheduler: an empty value is not allowed");
  check_refused("pbench", {"--scheduler-file", "", "-d"}, "--scheduler-file: an empty value");
  check_refused("pcuda-worker", {"--scheduler-file", ""}, "--scheduler-file: an empty value");
  check_refused("psched", {"--scheduler-file", ""}, "--scheduler-file: an empty value");
}

TEST_CASE("psched refuses a frame limit below what a Hello needs", "[cli]") {
  check_refused("psched", {"--max-frame", "1024"}, "--max-frame: 1024 is out of range; expected an integer from 65536");
}

TEST_CASE("pbench counts negative starts and stops from the end of their axis, as numpy does",
          "[cli]") {
  // x[:-7, -4:] of a 20 x 10 array: rows 0..12, columns 6..9.
  std::string out;
  const int status = run_command({bin_dir() + "/pbench", "-c", "1", "-x", "20", "-y", "10", "--chunk-x", "5",
                                  "--chunk-y", "5", "--row-step", "1", "--col-step", "1", "--row-stop", "-7",
                                  "--col-start", "-4", "--generator", "arange", "--offset", "0", "--check",
                                  "--json"},
                                 &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out);
  CHECK(j["count"] == 13 * 4);
  CHECK(j["min"] == 6.0);
  CHECK(j["max"] == 12 * 10 + 9.0);
  CHECK(j["check"] == "ok");
}
