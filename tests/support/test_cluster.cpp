#include "test_cluster.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "app/process.h"
#include "net/address.h"
#include "net/scheduler_file.h"

namespace psched::test {

std::string bin_dir() { return PSCHED_TEST_BIN_DIR; }

TempDir::TempDir() {
  char tmpl[] = "/tmp/psched-test.XXXXXX";
  if (!mkdtemp(tmpl)) throw pclient::Error("mkdtemp failed");
  path = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

TestCluster::TestCluster(const SchedulerOptions& options) {
  char tmpl[] = "/tmp/psched-test.XXXXXX";
  if (!mkdtemp(tmpl)) throw pclient::Error("mkdtemp failed");
  dir_ = tmpl;
  scheduler_file_ = dir_ + "/scheduler.json";
  start_scheduler(options, 0);
}

void TestCluster::start_scheduler(const SchedulerOptions& options, uint16_t port) {
  std::remove(scheduler_file_.c_str());
  client_tls_ = options.client_tls;
  ChildSpec spec;
  spec.path = bin_dir() + "/psched";
  spec.args = {"--host", "127.0.0.1", "--port", std::to_string(port), "--scheduler-file", scheduler_file_,
               "--dashboard-address", options.dashboard, "--log-level", "debug"};
  spec.args.insert(spec.args.end(), options.extra_args.begin(), options.extra_args.end());
  if (options.open_files > 0) {  // through a shell that sets the limit and becomes psched (same pid)
    spec.args.insert(spec.args.begin(), {"-c", "ulimit -n " + std::to_string(options.open_files) +
                                                   " && exec \"$0\" \"$@\"", spec.path});
    spec.path = "/bin/sh";
  }
  spec.env = options.env;
  spec.death_signal = SIGKILL;
  spec.stderr_path = dir_ + "/psched-" + std::to_string(next_log_++) + ".log";
  auto pid = spawn_child(spec);
  if (!pid) throw pclient::Error(pid.message());
  scheduler_pid_ = *pid;
  logs_[*pid] = spec.stderr_path;
  // Readiness: the scheduler file appears once psched listens.
  for (;;) {
    auto info = read_scheduler_file(scheduler_file_);
    if (info) {
      address_ = info->address;
      dashboard_ = info->dashboard;
      // The file names the host; tests talk to loopback explicitly.
      auto parsed = parse_address(address_);
      port_ = parsed ? parsed->port : 0;
      address_ = Address{"127.0.0.1", port_, parsed ? parsed->scheme : Scheme::kTcp}.to_string();
      return;
    }
    int status = 0;
    if (waitpid(scheduler_pid_, &status, WNOHANG) == scheduler_pid_) {
      scheduler_pid_ = -1;
      throw pclient::Error("psched exited during start-up: " + log_of(*pid));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void TestCluster::restart_scheduler(const SchedulerOptions& options) { start_scheduler(options, port_); }

TestCluster::~TestCluster() {
  for (pid_t pid : workers_) kill(pid, SIGTERM);
  for (pid_t pid : workers_) reap_child(pid, 5000);
  if (scheduler_pid_ > 0) stop_child(scheduler_pid_, 5000);
  if (std::getenv("PSCHED_TEST_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

pid_t TestCluster::add_worker(const WorkerOptions& options) {
  ChildSpec spec;
  spec.path = bin_dir() + "/pcuda-worker";
  spec.args = {options.address.empty() ? address_ : options.address, "--backend", "cpu", "--nthreads", std::to_string(options.threads), "--log-level",
               "debug"};
  if (!options.name.empty()) spec.args.insert(spec.args.end(), {"--name", options.name});
  spec.args.insert(spec.args.end(), options.extra_args.begin(), options.extra_args.end());
  if (!options.run_under.empty()) {
    spec.args.insert(spec.args.begin(), spec.path);
    spec.args.insert(spec.args.begin(), options.run_under.begin() + 1, options.run_under.end());
    spec.path = options.run_under.front();
  }
  spec.env = options.env;
  spec.death_signal = SIGKILL;
  spec.stderr_path = dir_ + "/worker-" + std::to_string(next_log_++) + ".log";
  auto pid = spawn_child(spec);
  if (!pid) throw pclient::Error(pid.message());
  workers_.push_back(*pid);
  logs_[*pid] = spec.stderr_path;
  return *pid;
}

void TestCluster::wait_for_workers(size_t n, int timeout_ms) {
  pclient::Client c = client();
  c.wait_for_workers(n, timeout_ms);
}

pclient::Client TestCluster::client(const std::string& token) {
  pclient::ConnectOptions o;
  o.address = address_;
  o.token = token;
  o.name = "test";
  o.tls_ca_file = client_tls_.ca_file;
  o.tls_cert_file = client_tls_.cert_file;
  o.tls_key_file = client_tls_.key_file;
  return pclient::Client::connect(o);
}

int TestCluster::stop(pid_t pid, int grace_ms) {
  kill(pid, SIGTERM);
  int status = 0;
  const bool exited = wait_child(pid, grace_ms, &status);
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  forget(pid);
  return exited ? status : -1;
}

void TestCluster::forget(pid_t pid) {
  std::erase(workers_, pid);
  if (pid == scheduler_pid_) scheduler_pid_ = -1;
}

std::string TestCluster::log_of(pid_t pid) const {
  auto it = logs_.find(pid);
  if (it == logs_.end()) return "";
  std::ifstream in(it->second);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

int run_command(const std::vector<std::string>& argv, std::string* output, int timeout_ms) {
  char tmpl[] = "/tmp/psched-cmd.XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  ChildSpec spec;
  spec.path = argv.at(0);
  spec.args.assign(argv.begin() + 1, argv.end());
  spec.stdout_path = tmpl;
  spec.stderr_path = tmpl;
  spec.death_signal = SIGKILL;
  auto pid = spawn_child(spec);
  if (!pid) return -1;
  int status = 0;
  if (!wait_child(*pid, timeout_ms, &status)) {
    kill(*pid, SIGKILL);
    waitpid(*pid, &status, 0);
  }
  if (output) {
    std::ifstream in(tmpl);
    std::stringstream s;
    s << in.rdbuf();
    *output = s.str();
  }
  std::remove(tmpl);
  return status;
}

TimedRun run_timed(const std::vector<std::string>& argv, int timeout_ms) {
  TimedRun r;
  const auto t0 = std::chrono::steady_clock::now();
  r.status = run_command(argv, &r.out, timeout_ms);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::function<void(const pclient::Progress&)> TestCluster::kill_busiest_worker(uint64_t after, bool& killed) {
  return [this, after, &killed](const pclient::Progress& p) {
    if (killed || p.chunks_done < after) return;
    pid_t busy = -1;
    uint64_t most = 0;
    for (const pclient::WorkerInfo& w : client().workers())
      if (w.chunks_done > most) most = w.chunks_done, busy = pid_t(w.pid);
    if (busy <= 0) return;  // none has finished a chunk yet: try at the next progress
    killed = true;
    kill(busy, SIGKILL);
    waitpid(busy, nullptr, 0);
    forget(busy);
  };
}

pclient::Result run_with_a_worker_killed(const pclient::Job& job, bool& killed) {
  TestCluster cluster;
  for (int i = 0; i < 3; ++i) cluster.add_worker({.threads = 1, .env = {{"PSCHED_TEST_CHUNK_DELAY_MS", "15"}}});
  cluster.wait_for_workers(3);
  pclient::Client client = cluster.client();
  killed = false;
  pclient::RunOptions options;
  options.on_progress = cluster.kill_busiest_worker(10, killed);
  return client.run(job, options);
}

}  // namespace psched::test
