// Stopping children (app/process.h): one SIGTERM each, then a wait bounded by the grace, then
// SIGKILL. Real children (/bin/sh) that count the SIGTERMs they get.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "app/process.h"

using namespace psched;

namespace {

// Waits (10 s at most) until the child's output holds `word`.
void wait_until_said(const std::string& out, const std::string& word) {
  std::string said;
  for (int ms = 0; ms < 10000 && said.find(word) == std::string::npos; ++ms, usleep(1000)) {
    std::ifstream f(out);
    said.assign(std::istreambuf_iterator<char>(f), {});
  }
  REQUIRE(said.find(word) != std::string::npos);
}

// A child that, once sent SIGTERM, says "stopping" and takes about 0.3 s to stop (as a worker
// leaving does), exiting 9 if another SIGTERM came meanwhile, else 0; `ignore`: it never stops on
// SIGTERM at all. Started once its trap is set (it says "ready" then): a SIGTERM before would end
// it at once. `out` gets what it says.
struct StoppingChild {
  explicit StoppingChild(bool ignore = false)
      : out((std::filesystem::temp_directory_path() / ("psched_process_test_" + std::to_string(getpid())))
                .string()) {
    std::filesystem::remove(out);
    ChildSpec spec;
    spec.path = "/bin/sh";
    spec.stdout_path = out;
    const std::string stop = ignore ? "while :; do sleep 0.01; done"
                                    : "while [ $n -eq 0 ]; do sleep 0.01; done; i=0; "
                                      "while [ $i -lt 30 ]; do sleep 0.01; i=$((i+1)); done; "
                                      "[ $n -ge 2 ] && exit 9; exit 0";
    spec.args = {"-c", "n=0; trap 'n=$((n+1)); echo stopping' TERM; echo ready; " + stop};
    auto made = spawn_child(spec);
    REQUIRE(made.is_ok());
    pid = *made;
    wait_until_said(out, "ready");
  }
  ~StoppingChild() { std::filesystem::remove(out); }
  std::string out;
  pid_t pid = -1;
};

}  // namespace

TEST_CASE("reap_child waits for a child already stopping after SIGTERM and never sends it another",
          "[process]") {
  StoppingChild child;
  REQUIRE(kill(child.pid, SIGTERM) == 0);
  wait_until_said(child.out, "stopping");
  const int status = reap_child(child.pid, 10000);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 9: a second SIGTERM cut its stop short
}

TEST_CASE("reap_child kills a child that does not stop within the grace", "[process]") {
  StoppingChild child(/*ignore=*/true);
  REQUIRE(kill(child.pid, SIGTERM) == 0);
  const int status = reap_child(child.pid, 200);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("stop_child sends one SIGTERM and reaps the child", "[process]") {
  StoppingChild child;
  const int status = stop_child(child.pid, 10000);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
