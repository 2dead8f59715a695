// Options that can never work stop a program at start with one line naming the option, the path or
// the limit, instead of a misleading message or a wait for ever; and psched logs every refusal it
// sends, also those of a connection that never said Hello.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "app/exit_codes.h"
#include "app/process.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("a directory given as --scheduler-file stops psched, pcuda-worker and pbench at once, saying so",
          "[startup]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string says = "--scheduler-file '" + dir + "' is a directory; expected the path of the file "
                           "psched writes its address to";
  const std::vector<std::vector<std::string>> commands = {
      {bin_dir() + "/psched", "--port", "0", "--dashboard-address", "none", "--scheduler-file", dir},
      {bin_dir() + "/pcuda-worker", "--scheduler-file", dir, "--backend", "cpu"},
      {bin_dir() + "/pbench", "-d", "--scheduler-file", dir, "--connect-timeout", "60000"},
  };
  for (const auto& argv : commands) {
    const TimedRun run = run_timed(argv, 20000);
    INFO(argv[0] << ": " << run.out);
    CHECK(WIFEXITED(run.status));
    CHECK(WEXITSTATUS(run.status) == psched::kExitUsage);  // the failure's kind, the same for all three
    CHECK(contains(run.out, says));
    CHECK(run.seconds < 10);  // not the minute pbench would wait, nor the worker's for ever
  }
}

TEST_CASE("psched refuses a scheduler file in a directory that does not exist before it listens", "[startup]") {
  std::string out;
  const int status = run_command({bin_dir() + "/psched", "--port", "0", "--dashboard-address", "none",
                                  "--scheduler-file", "/nonexistent-psched-dir/s.json"},
                                 &out, 20000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(contains(out, "psched: --scheduler-file '/nonexistent-psched-dir/s.json': its directory "
                      "'/nonexistent-psched-dir' does not exist"));
}

TEST_CASE("an oversize --name stops the worker at start, naming --name and the limit", "[startup]") {
  std::string out;
  const int status = run_command({bin_dir() + "/pcuda-worker", "tcp://127.0.0.1:1", "--backend", "cpu", "--name",
                                  std::string(300, 'n')},
                                 &out, 20000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == psched::kExitUsage);
  CHECK(contains(out, "--name is 300 bytes long; at most 128"));
}

TEST_CASE("a client name over the limit is refused before connecting, and an oversize Hello is logged by psched",
          "[startup]") {
  TestCluster cluster;
  pclient::ConnectOptions options;
  options.address = cluster.address();
  options.name = std::string(129, 'c');
  CHECK_THROWS_WITH(pclient::Client::connect(options), "client name is 129 bytes long; at most 128");
  // A Hello past the 64 KiB allowed before Hello (a token this long): refused, and psched says so.
  options.name = "big-hello";
  options.token = std::string(100000, 't');
  CHECK_THROWS(pclient::Client::connect(options));
  CHECK(eventually([&] {
    return contains(cluster.log_of(cluster.scheduler_pid()), "refused before Hello: frame of ");
  }));
}

TEST_CASE("SIGHUP to psched without TLS or a token file: it keeps serving and says nothing was reloaded",
          "[sighup]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  REQUIRE(kill(cluster.scheduler_pid(), SIGHUP) == 0);
  REQUIRE(eventually([&] {
    return contains(cluster.log_of(cluster.scheduler_pid()),
                    "SIGHUP: nothing to reload (no --tls-* or --token-file); 0 running jobs go on");
  }));
  CHECK(cluster.client().workers().size() == 1);
}

TEST_CASE("SIGHUP to pbench waiting on a job: it stops, saying so", "[sighup][pbench]") {
  TestCluster cluster;
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/pbench";
  spec.args = {"-d", "--scheduler", cluster.address(), "--no-workers-timeout", "never", "-x", "100", "-y", "100",
               "--chunk-x", "10", "--chunk-y", "10"};
  const std::string log = cluster.dir() + "/pbench-hup.log";
  spec.stderr_path = log;
  auto pid = psched::spawn_child(spec);
  REQUIRE(pid);
  // It waits for a worker (none will come), having said so.
  REQUIRE(eventually([&] { return contains(read_file(log), "pbench: no workers: waiting for ever"); }));
  kill(*pid, SIGHUP);
  int status = 0;
  REQUIRE(psched::wait_child(*pid, 10000, &status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGHUP);
  CHECK(contains(read_file(log), "pbench: SIGHUP (hang-up): stopped"));
}
