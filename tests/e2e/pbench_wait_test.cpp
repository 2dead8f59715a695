// pbench's waits honour --connect-timeout, say once what they wait for and end with the precise
// reason: a scheduler file whose directory does not exist, one that holds garbage.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "support/test_cluster.h"

using namespace psched::test;

namespace {

TimedRun pbench_with_file(const std::string& file) {
  return run_timed({bin_dir() + "/pbench", "-d", "--scheduler-file", file, "--connect-timeout", "1000"}, 20000);
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("pbench --scheduler-file in a directory that does not exist gives up after --connect-timeout, "
          "saying why",
          "[pbench][wait]") {
  const TimedRun w = pbench_with_file("/nonexistent-psched-dir/x.json");
  INFO(w.out);
  CHECK(WEXITSTATUS(w.status) == 1);
  CHECK(w.seconds < 5);  // not the 30 s it used to wait
  CHECK(count_of(w.out, "waiting up to 1000 ms for the scheduler file") == 1);
  CHECK(w.out.find("no usable scheduler file within 1000 ms: cannot read scheduler file "
                   "'/nonexistent-psched-dir/x.json': no such file; its directory /nonexistent-psched-dir "
                   "does not exist") != std::string::npos);
}

TEST_CASE("pbench --scheduler-file holding garbage says the file is not valid, not that it did not appear",
          "[pbench][wait]") {
  char tmpl[] = "/tmp/pbench-garbage.XXXXXX";
  const int fd = mkstemp(tmpl);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "\x01garbage{", 9) == 9);
  close(fd);
  const TimedRun w = pbench_with_file(tmpl);
  unlink(tmpl);
  INFO(w.out);
  CHECK(WEXITSTATUS(w.status) == 1);
  CHECK(w.seconds < 5);
  CHECK(count_of(w.out, "waiting up to 1000 ms") == 1);
  CHECK(w.out.find("is not valid: not JSON") != std::string::npos);
  CHECK(w.out.find("did not appear") == std::string::npos);
}
