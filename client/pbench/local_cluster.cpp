#include "local_cluster.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstring>
#include <cstdlib>
#include <filesystem>

#include "app/exit_codes.h"
#include "app/process.h"
#include "net/scheduler_file.h"

namespace pbench {

namespace {

// Children the signal handler must stop: a fixed array, written before the handler can see it.
constexpr int kMaxChildren = 1024;
pid_t g_children[kMaxChildren];
std::atomic<int> g_child_count{0};

void register_child(pid_t pid) {
  const int i = g_child_count.load();
  if (i < kMaxChildren) {
    g_children[i] = pid;
    g_child_count.store(i + 1);
  }
}

void unregister_all() { g_child_count.store(0); }

// Starts a child and registers it with the signal handlers blocked in between: a Ctrl-C that lands
// after fork() but before register_child() would otherwise leave that child running (it got only
// PR_SET_PDEATHSIG's late SIGTERM, after pbench had already said "local cluster stopped").
psched::StatusOr<pid_t> spawn_registered(const psched::ChildSpec& spec) {
  sigset_t cleanup, old;
  sigemptyset(&cleanup);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&cleanup, sig);
  sigprocmask(SIG_BLOCK, &cleanup, &old);
  auto pid = psched::spawn_child(spec);  // the child clears its signal mask before exec
  if (pid) register_child(*pid);
  sigprocmask(SIG_SETMASK, &old, nullptr);  // a signal that came meanwhile is handled here
  return pid;
}

extern "C" void on_fatal_signal(int sig) {
  const int n = g_child_count.load();
  for (int i = n - 1; i >= 0; --i) kill(g_children[i], SIGTERM);
  for (int i = n - 1; i >= 0; --i) waitpid(g_children[i], nullptr, 0);
  // Fixed texts: nothing else is safe in a signal handler.
  const char* msg = sig == SIGHUP ? (n > 0 ? "pbench: SIGHUP (hang-up): stopped; local cluster stopped\n"
                                           : "pbench: SIGHUP (hang-up): stopped; the scheduler cancels the job\n")
                                  : (n > 0 ? "pbench: interrupted; local cluster stopped\n" : "pbench: interrupted\n");
  (void)!write(2, msg, strlen(msg));
  _exit(psched::exit_code_for_signal(sig));
}

}  // namespace

void install_cleanup_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

LocalCluster::~LocalCluster() { stop(); }

psched::Status LocalCluster::start(const LocalClusterOptions& o) {
  const std::string bin = o.bin_dir.empty() ? psched::self_exe_dir() : o.bin_dir;
  for (const char* binary : {"psched", "pcuda-worker"})
    if (const std::string path = bin + "/" + binary; access(path.c_str(), X_OK) != 0)
      return psched::Status::error(fmt::format("cannot find {} (local mode runs it from pbench's directory)", path));

  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/pbench.XXXXXX";
  if (!mkdtemp(tmpl.data()))
    return psched::Status::error("cannot create a temporary directory for the local cluster in " + tmpl);
  dir_ = tmpl;
  scheduler_file_ = dir_ + "/scheduler.json";

  const std::vector<LocalChild> children = pclient::local_cluster_children(o, scheduler_file_);
  for (const LocalChild& child : children) {
    psched::ChildSpec spec;
    spec.path = bin + "/" + child.binary;
    spec.args = child.args;
    spec.env = child.env;
    auto pid = spawn_registered(spec);
    if (!pid) return pid.status();
    pids_.push_back(*pid);
    const auto name = std::find(child.args.begin(), child.args.end(), "--name");
    names_.push_back(name != child.args.end() && name + 1 != child.args.end() ? *(name + 1) : "");
    if (pids_.size() > 1) continue;
    // The scheduler first: the workers read the address it writes.
    auto info = psched::wait_for_scheduler_file(scheduler_file_, 15000);
    if (!info) return psched::Status::error("local scheduler did not start: " + info.message());
  }
  workers_ = int(children.size()) - 1;
  return psched::Status::ok();
}

psched::Status LocalCluster::check_children() {
  for (size_t i = 0; i < pids_.size(); ++i) {
    int status = 0;
    if (waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    const std::string what = i == 0 ? "psched" : fmt::format("pcuda-worker {}", i - 1);
    pids_.erase(pids_.begin() + long(i));
    names_.erase(names_.begin() + long(i));
    return psched::Status::error(fmt::format("local {} {}{}", what, psched::describe_exit_status(status),
                                             WIFEXITED(status) ? " (its error is above)" : ""));
  }
  return psched::Status::ok();
}

std::vector<LocalCluster::WorkerExit> LocalCluster::reap_exited_workers() {
  std::vector<WorkerExit> exits;
  for (size_t i = pids_.size(); i-- > 1;) {
    int status = 0;
    if (waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
    exits.push_back({names_[i], pids_[i], psched::describe_exit_status(status)});
    pids_.erase(pids_.begin() + long(i));
    names_.erase(names_.begin() + long(i));
  }
  return exits;
}

void LocalCluster::stop() {
  // Workers first (they say goodbye), then the scheduler.
  for (size_t i = pids_.size(); i-- > 1;) kill(pids_[i], SIGTERM);
  for (size_t i = pids_.size(); i-- > 1;) psched::reap_child(pids_[i], 3000);
  if (!pids_.empty()) psched::stop_child(pids_[0], 3000);
  pids_.clear();
  names_.clear();
  unregister_all();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

}  // namespace pbench
