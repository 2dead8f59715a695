// pbench as a user runs it: local mode, distributed mode, output formats, and bad input.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "app/process.h"
#include "support/processes.h"
#include "support/test_cluster.h"

using namespace psched::test;

namespace {

std::string pbench() { return bin_dir() + "/pbench"; }

// Live processes whose command line mentions `needle` (pbench's local cluster lives in TMPDIR).
std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  for (const ProcessEntry& p : live_processes())
    if (p.cmdline.find(needle) != std::string::npos && p.pid != getpid() && process_alive(p.pid)) out.push_back(p.pid);
  return out;
}

}  // namespace

TEST_CASE("pbench -c 2 runs the job on its own cluster, prints the DeepOps benchmark's lines and leaves nothing behind",
          "[pbench]") {
  TempDir tmp;
  std::string out;
  const int status = run_command({"/usr/bin/env", "TMPDIR=" + tmp.path, pbench(), "-c", "2", "-x", "3000", "-y",
                                  "2000", "--chunk-x", "500", "--chunk-y", "500", "--generator", "arange",
                                  "--check"},
                                 &out);
  INFO(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out.find("Array size: 48.00 MB.  Computing parallel sum . . .") != std::string::npos);
  CHECK(out.find("Processing complete.") != std::string::npos);
  CHECK(out.find("Wall time create data + computation time: ") != std::string::npos);
  CHECK(out.find("Check: ok") != std::string::npos);
  CHECK(out.find("on 2 workers") != std::string::npos);
  CHECK(processes_mentioning(tmp.path).empty());
}

TEST_CASE("pbench --json --repeat prints one object with the runs", "[pbench]") {
  TempDir tmp;
  std::string out;
  const int status = run_command({"/usr/bin/env", "TMPDIR=" + tmp.path, pbench(), "-c", "1", "-x", "1000", "-y",
                                  "1000", "--chunk-x", "250", "--chunk-y", "250", "--json", "--repeat", "3",
                                  "--check"},
                                 &out);
  INFO(out);
  REQUIRE(WEXITSTATUS(status) == 0);
  const auto j = nlohmann::json::parse(out);
  for (const char* key : {"sum", "count", "mean", "min", "max", "seconds", "chunks", "bytes", "workers", "runs"})
    CHECK(j.contains(key));
  CHECK(j["bytes"] == 8000000);
  CHECK(j["chunks"] == 16);
  CHECK(j["count"] == 250000);
  CHECK(j["runs"].size() == 3);
  CHECK(j["check"] == "ok");
  // Each device reports its own share of the last run: chunks and busy time by its own timings.
  REQUIRE(j["devices"].size() == 1);
  const auto& d = j["devices"][0];
  CHECK(d["chunks_done"] == 48);  // three runs
  CHECK(d["run_chunks"] == 16);   // the last one
  CHECK(d["run_busy_seconds"].get<double>() > 0);
  CHECK(d["run_busy_seconds"].get<double>() <= d["busy_seconds"].get<double>());
  CHECK(d["run_busy_fraction"].get<double>() > 0);
  CHECK(d["run_busy_fraction"].get<double>() <= 1.01);  // per thread, within the run's wall time
}

TEST_CASE("pbench -d uses a running cluster by address and by scheduler file", "[pbench]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  for (const std::vector<std::string>& where :
       {std::vector<std::string>{"--scheduler", cluster.address()},
        std::vector<std::string>{"--scheduler", cluster.address().substr(6)},  // host:port
        std::vector<std::string>{"--scheduler-file", cluster.scheduler_file()}}) {
    std::vector<std::string> argv = {pbench(), "-d", "-x", "500", "-y", "700", "--chunk-x", "100", "--chunk-y",
                                     "100", "--generator", "arange", "--check"};
    argv.insert(argv.end(), where.begin(), where.end());
    std::string out;
    const int status = run_command(argv, &out);
    INFO(out);
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(out.find("Check: ok") != std::string::npos);
  }
}

TEST_CASE("pbench refuses bad flags and addresses with one clear line and a non-zero exit", "[pbench]") {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"-x", "0"}, "--rows: 0 is out of range; expected an integer from 1 to"},
      {{"--chunk-x", "0"}, "--chunk-x: 0 is out of range"},
      {{"--row-step", "0"}, "--row-step: 0 is out of range"},
      {{"--generator", "nosuch"}, "unknown generator 'nosuch'"},
      {{"-d", "--scheduler", "tcp://127.0.0.1:1"}, "cannot connect to scheduler tcp://127.0.0.1:1"},
      {{"-d", "--scheduler", "tcp://[not-an-address"}, "invalid address"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> argv = {pbench()};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    const int status = run_command(argv, &out, 15000);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(c.args.back() << " -> " << out);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) != 0);
    CHECK(out.find(c.says) != std::string::npos);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    CHECK(seconds < 10);
  }
}

TEST_CASE("Ctrl-C on pbench in local mode stops its scheduler and workers", "[pbench]") {
  TempDir tmp;
  psched::ChildSpec spec;
  spec.path = "/usr/bin/env";
  spec.args = {"TMPDIR=" + tmp.path, pbench(), "-c", "2", "-x", "200000", "-y", "20000", "--chunk-x", "2000",
               "--chunk-y", "2000", "-q"};
  spec.stdout_path = tmp.path + "/out.log";
  spec.stderr_path = tmp.path + "/out.log";
  auto pid = psched::spawn_child(spec);
  REQUIRE(pid);
  // Ready: the scheduler and both workers are running (their command lines name the temp dir).
  REQUIRE(eventually([&] { return processes_mentioning(tmp.path).size() >= 3; }));
  kill(*pid, SIGINT);
  int status = 0;
  REQUIRE(psched::wait_child(*pid, 10000, &status));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK(processes_mentioning(tmp.path).empty());
}

TEST_CASE("kill -9 of pbench in local mode takes its daemons along", "[pbench]") {
  TempDir tmp;
  psched::ChildSpec spec;
  spec.path = pbench();
  spec.env = {{"TMPDIR", tmp.path}};
  spec.args = {"-c", "1", "-x", "200000", "-y", "20000", "--chunk-x", "2000", "--chunk-y", "2000", "-q"};
  spec.stdout_path = tmp.path + "/out.log";
  spec.stderr_path = tmp.path + "/out.log";
  auto pid = psched::spawn_child(spec);
  REQUIRE(pid);
  REQUIRE(eventually([&] { return processes_mentioning(tmp.path).size() >= 2; }));
  kill(*pid, SIGKILL);
  waitpid(*pid, nullptr, 0);
  CHECK(eventually([&] { return processes_mentioning(tmp.path).empty(); }, 10000));
}
