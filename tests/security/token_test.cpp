// Token authentication end to end: psched --token-file / PSCHED_TOKEN; workers and pbench without
// the token, with a wrong one and with the right one (file and environment); the token never
// appears in any log; a token file others can read is warned about.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>
#include <random>

#include "abuse_helpers.h"
#include "app/process.h"
#include "raw_peer.h"

using namespace psched::test;
namespace wire = psched::wire;

namespace {

struct TokenFiles {
  std::string dir, token, good, wrong;
  TokenFiles() {
    char tmpl[] = "/tmp/psched-token.XXXXXX";
    dir = mkdtemp(tmpl);
    std::random_device rd;
    token = "tok-" + std::to_string(rd()) + "-" + std::to_string(rd());
    good = write("good", token + "\n", 0600);
    wrong = write("wrong", "not-" + token, 0600);
  }
  ~TokenFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string write(const std::string& name, const std::string& text, mode_t mode) const {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  }
};

std::string pbench() { return bin_dir() + "/pbench"; }

std::vector<std::string> pbench_job(const TestCluster& cluster) {
  return {pbench(), "-d", "--scheduler", cluster.address(), "-x", "300", "-y", "300", "--chunk-x", "100",
          "--chunk-y", "100", "--generator", "arange", "--check", "-q"};
}

// Waits for a worker that should give up; returns its exit status (as from waitpid), -1 if it did not.
int exit_status(TestCluster& cluster, pid_t pid, int timeout_ms = 15000) {
  int status = 0;
  if (!psched::wait_child(pid, timeout_ms, &status)) return -1;
  cluster.forget(pid);
  return status;
}

// Every file the cluster wrote (logs, scheduler file) as one string.
std::string all_files(const std::string& dir) {
  std::string text;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    if (entry.is_regular_file()) text += read_text(entry.path().string());
  return text;
}

}  // namespace

TEST_CASE("with --token-file, workers need the token: without it or with a wrong one they exit 1 saying why",
          "[security][token]") {
  TokenFiles t;
  TestCluster cluster({.extra_args = {"--token-file", t.good}});
  CHECK(cluster.log_of(cluster.scheduler_pid()).find("token authentication is on") != std::string::npos);

  const pid_t none = cluster.add_worker({.threads = 1});
  const int none_status = exit_status(cluster, none);
  CHECK(WIFEXITED(none_status));
  CHECK(WEXITSTATUS(none_status) == 1);
  CHECK(cluster.log_of(none).find("scheduler refused registration: this scheduler requires a token "
                                  "(--token-file or PSCHED_TOKEN)") != std::string::npos);

  const pid_t wrong = cluster.add_worker({.threads = 1, .extra_args = {"--token-file", t.wrong}});
  const int wrong_status = exit_status(cluster, wrong);
  CHECK(WIFEXITED(wrong_status));
  CHECK(WEXITSTATUS(wrong_status) == 1);
  CHECK(cluster.log_of(wrong).find("scheduler refused registration: invalid token") != std::string::npos);

  // The right token, from a file and from the environment.
  cluster.add_worker({.threads = 1, .extra_args = {"--token-file", t.good}});
  cluster.add_worker({.threads = 1, .env = {{"PSCHED_TOKEN", t.token}}});
  CHECK_THROWS_WITH(cluster.client(), Catch::Contains("refused us: this scheduler requires a token"));
  CHECK_THROWS_WITH(cluster.client("not-" + t.token), Catch::Contains("refused us: invalid token"));
  pclient::Client client = cluster.client(t.token);
  client.wait_for_workers(2, 20000);
  const pclient::Job job = arange_job(300, 300, 100, 100);
  CHECK(check(job, client.run(job)) == "");
  client.close();

  const std::string logs = all_files(cluster.dir());
  CHECK(logs.find("invalid token") != std::string::npos);  // the scheduler logged the refusals...
  CHECK(logs.find(t.token) == std::string::npos);          // ...and never the token
}

TEST_CASE("a client reads PSCHED_TOKEN as the daemons do, a trailing newline not part of the token",
          "[security][token]") {
  TokenFiles t;
  TestCluster cluster({.extra_args = {"--token-file", t.good}});
  // A worker's PSCHED_TOKEN with the newline `echo` or a secret store leaves is accepted...
  cluster.add_worker({.threads = 1, .env = {{"PSCHED_TOKEN", t.token + "\n"}}});
  // ...and so is a client's (the library reads it when ConnectOptions::token is empty).
  struct Unset {
    ~Unset() { unsetenv("PSCHED_TOKEN"); }
  } unset;
  setenv("PSCHED_TOKEN", (t.token + "\n").c_str(), 1);
  pclient::Client client = cluster.client();
  CHECK(client.wait_for_workers(1, 20000).size() == 1);
}

TEST_CASE("pbench without the token, with a wrong one and with the right one", "[security][token]") {
  TokenFiles t;
  TestCluster cluster({.env = {{"PSCHED_TOKEN", t.token}}});
  cluster.add_worker({.threads = 1, .extra_args = {"--token-file", t.good}});
  cluster.client(t.token).wait_for_workers(1, 20000);

  struct Case {
    std::vector<std::string> before, after;  // env prefix, extra pbench flags
    int exit_code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{}, {}, 1, "refused us: this scheduler requires a token (--token-file or PSCHED_TOKEN)"},
      {{}, {"--token-file", t.wrong}, 1, "refused us: invalid token"},
      {{"PSCHED_TOKEN=not-" + t.token}, {}, 1, "refused us: invalid token"},
      {{}, {"--token-file", t.dir + "/missing"}, 2, "cannot read token file"},
      {{}, {"--token-file", t.dir}, 2, "token file '" + t.dir + "' is a directory; expected a file holding the cluster token"},
      {{}, {"--token-file", t.good}, 0, "Check: ok"},
      {{"PSCHED_TOKEN=" + t.token}, {}, 0, "Check: ok"},
  };
  std::string outputs;
  for (const auto& c : cases) {
    std::vector<std::string> argv = {"/usr/bin/env", "-u", "PSCHED_TOKEN"};
    argv.insert(argv.end(), c.before.begin(), c.before.end());
    const auto job = pbench_job(cluster);
    argv.insert(argv.end(), job.begin(), job.end());
    argv.insert(argv.end(), c.after.begin(), c.after.end());
    std::string out;
    const auto t0 = std::chrono::steady_clock::now();
    const int status = run_command(argv, &out, 30000);
    INFO(c.says << " -> " << out);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == c.exit_code);
    CHECK(out.find(c.says) != std::string::npos);
    if (c.exit_code != 0) CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
    outputs += out;
  }
  // The token is in no log and no output (only the commands above carried it, in their environment).
  CHECK(outputs.find(t.token) == std::string::npos);
  CHECK(all_files(cluster.dir()).find(t.token) == std::string::npos);
}

TEST_CASE("a token file others can read is warned about (without the token), and still works",
          "[security][token]") {
  TokenFiles t;
  const std::string open_file = t.write("open", t.token, 0644);
  TestCluster cluster({.extra_args = {"--token-file", open_file}});
  const std::string log = cluster.log_of(cluster.scheduler_pid());
  CHECK(log.find("token file '" + open_file + "' is readable by other users; chmod 600 it") != std::string::npos);
  CHECK(log.find(t.token) == std::string::npos);
  CHECK_NOTHROW(cluster.client(t.token));
  // pbench says so too, on stderr in the daemons' log format, and still runs.
  cluster.add_worker({.threads = 1, .extra_args = {"--token-file", t.good}});
  cluster.client(t.token).wait_for_workers(1, 20000);
  std::vector<std::string> argv = {"/usr/bin/env", "-u", "PSCHED_TOKEN"};
  const auto job = pbench_job(cluster);
  argv.insert(argv.end(), job.begin(), job.end());
  argv.insert(argv.end(), {"--token-file", open_file});
  std::string out;
  const int status = run_command(argv, &out, 30000);
  INFO(out);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(out.find("pbench warning token file '" + open_file + "' is readable by other users; chmod 600 it") !=
        std::string::npos);
  CHECK(out.find("Check: ok") != std::string::npos);
  CHECK(out.find(t.token) == std::string::npos);
}

TEST_CASE("an empty or unreadable token file stops psched at start with a clear message", "[security][token]") {
  TokenFiles t;
  const std::string empty = t.write("empty", "\n", 0600);
  std::string out;
  int status = run_command({bin_dir() + "/psched", "--port", "0", "--dashboard-address", "none",
                            "--token-file", empty}, &out, 10000);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("psched: token file '" + empty + "' is empty") != std::string::npos);
  status = run_command({bin_dir() + "/psched", "--port", "0", "--dashboard-address", "none",
                        "--token-file", t.dir + "/missing"}, &out, 10000);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK(out.find("cannot read token file") != std::string::npos);
}

TEST_CASE("a raw Hello with a wrong token is refused before anything else is read", "[security][token]") {
  TokenFiles t;
  TestCluster cluster({.extra_args = {"--token-file", t.good}});
  RawPeer peer(port_of(cluster));
  peer.hello_as_worker(4, t.token + "x");
  CHECK(peer.read_error() == "invalid token");
  CHECK(peer.wait_closed());
  RawPeer shorter(port_of(cluster));
  shorter.hello_as_client(t.token.substr(0, t.token.size() - 1));
  CHECK(shorter.read_error() == "invalid token");
  RawPeer nul(port_of(cluster));
  nul.hello_as_client(t.token + std::string("\0x", 2));  // the right token, then a NUL and more
  CHECK(nul.read_error() == "invalid token");
  RawPeer right(port_of(cluster));
  right.hello_as_client(t.token);
  CHECK(right.read_until(wire::Message::WELCOME));
}
