// TestCluster: real psched and pcuda-worker processes for end-to-end tests, on loopback with free
// ports. Readiness is waited on, never slept for: the scheduler file appearing (written once psched
// listens) and the scheduler reporting the workers registered. Every process is stopped by pid.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <thread>
#include <string>
#include <vector>

#include "net/tls.h"
#include "pclient/client.h"

namespace psched::test {

std::string bin_dir();  // where the built psched / pcuda-worker / pbench live

struct SchedulerOptions {
  std::vector<std::string> extra_args;  // e.g. {"--worker-timeout", "2"}
  std::map<std::string, std::string> env;
  std::string dashboard = "none";       // or "127.0.0.1:0"
  psched::TlsFiles client_tls;          // what client() and wait_for_workers() present (TLS clusters)
  int open_files = 0;                   // psched's file descriptor limit (ulimit -n); 0: the tests'
};

struct WorkerOptions {
  int threads = 1;
  std::string address;  // empty: the cluster's
  std::string name;
  std::vector<std::string> extra_args;
  std::map<std::string, std::string> env;
  // A command the worker runs under, e.g. {"setpriv", "--reuid=65534", ...}: as another user.
  std::vector<std::string> run_under;
};

class TestCluster {
 public:
  explicit TestCluster(const SchedulerOptions& options = {});
  ~TestCluster();
  TestCluster(const TestCluster&) = delete;
  TestCluster& operator=(const TestCluster&) = delete;

  const std::string& address() const { return address_; }       // tcp:// (or tls://) 127.0.0.1:PORT
  const std::string& dashboard() const { return dashboard_; }   // http://... or ""
  const std::string& scheduler_file() const { return scheduler_file_; }
  const std::string& dir() const { return dir_; }
  pid_t scheduler_pid() const { return scheduler_pid_; }

  pid_t add_worker(const WorkerOptions& options = {});
  // Blocks until the scheduler lists n workers (throws pclient::Error after timeout_ms).
  void wait_for_workers(size_t n, int timeout_ms = 20000);
  pclient::Client client(const std::string& token = "");

  // Starts psched again on the same port (after the old one exited).
  void restart_scheduler(const SchedulerOptions& options = {});
  // SIGTERM + wait; returns the exit status (as from waitpid) or -1 if it had to be killed.
  int stop(pid_t pid, int grace_ms = 5000);
  std::string log_of(pid_t pid) const;
  std::vector<pid_t> worker_pids() const { return workers_; }
  void forget(pid_t pid);  // a process the test reaped itself
  // A progress callback that, once `after` chunks are done, SIGKILLs the worker that has computed
  // the most (asked through a second connection: a small job may go whole to one worker), reaps
  // and forgets it, and sets `killed`. Once only.
  std::function<void(const pclient::Progress&)> kill_busiest_worker(uint64_t after, bool& killed);

 private:
  void start_scheduler(const SchedulerOptions& options, uint16_t port);

  std::string dir_, scheduler_file_, address_, dashboard_;
  pid_t scheduler_pid_ = -1;
  uint16_t port_ = 0;
  psched::TlsFiles client_tls_;
  std::vector<pid_t> workers_;
  std::map<pid_t, std::string> logs_;
  int next_log_ = 0;
};

// Polls a condition that real processes bring about (a process gone, a log line written), up to
// timeout_ms: for readiness the tests cannot be signalled about, never to wait out a fixed time.
template <typename F>
bool eventually(F condition, int timeout_ms = 20000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

// A fresh directory under /tmp, removed with all it holds when the test ends.
struct TempDir {
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

// `job` run on a fresh cluster of three one-thread workers (each chunk delayed 15 ms), the busiest
// killed once 10 chunks are done (TestCluster::kill_busiest_worker); `killed` says it was.
pclient::Result run_with_a_worker_killed(const pclient::Job& job, bool& killed);

// True while a process with this pid exists (and is not a zombie of ours).
bool process_alive(pid_t pid);
// Runs a command, captures stdout+stderr, returns the exit status (as from waitpid).
int run_command(const std::vector<std::string>& argv, std::string* output, int timeout_ms = 60000);
// As run_command, with the wall seconds it took (for checks that a wait ended on time).
struct TimedRun {
  int status = 0;
  std::string out;
  double seconds = 0;
};
TimedRun run_timed(const std::vector<std::string>& argv, int timeout_ms = 60000);

}  // namespace psched::test
