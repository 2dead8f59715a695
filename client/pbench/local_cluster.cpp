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
#include <thread>

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
psched::Result<pid_t> spawn_registered(const psched::ChildSpec& spec) {
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

namespace {

std::vector<std::string> tls_args_of(const psched::TlsFiles& tls) {
  if (!tls.any()) return {};
  return {"--tls-ca-file", tls.ca_file, "--tls-cert", tls.cert_file, "--tls-key", tls.key_file};
}

// The GPUs visible to us (CUDA_VISIBLE_DEVICES, which may already narrow them), as its entries.
std::vector<std::string> visible_gpus() {
  std::vector<std::string> visible;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env && *env) {
    std::string list = env;
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      visible.push_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return visible;
}

// Worker i of n: a CPU worker with its share of the cores, or GPU i of those visible (-g N: GPUs
// 0..N-1).
LocalChild worker_child(const LocalClusterOptions& o, const std::vector<std::string>& shared,
                        const std::vector<std::string>& visible, int i, int n) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = o.threads_per_worker > 0 ? o.threads_per_worker : std::max(1, int(cores) / std::max(1, n));
  LocalChild w{"pcuda-worker", shared, {}};
  w.args.insert(w.args.end(), {"--name", fmt::format("local-{}", i)});
  if (o.gpu_workers > 0) {
    w.args.insert(w.args.end(), {"--backend", "cuda"});
    w.env["CUDA_VISIBLE_DEVICES"] = size_t(i) < visible.size() ? visible[size_t(i)] : std::to_string(i);
  } else {
    w.args.insert(w.args.end(), {"--backend", "cpu", "--nthreads", std::to_string(threads)});
  }
  return w;
}

}  // namespace

std::vector<LocalChild> local_cluster_children(const LocalClusterOptions& o, const std::string& scheduler_file) {
  LocalChild sched{"psched",
                   {"--host", "127.0.0.1", "--port", "0", "--dashboard-address", o.dashboard_address,
                    "--scheduler-file", scheduler_file, "--log-level", o.log_level},
                   {}};
  // What every worker is started with (its name, backend and device follow), and what psched and
  // the workers both are.
  std::vector<std::string> shared = {"--scheduler-file", scheduler_file, "--log-level", o.log_level,
                                     "--death-timeout", "10"};
  if (!o.memory_limit.empty()) shared.insert(shared.end(), {"--memory-limit", o.memory_limit});
  std::vector<std::string> both = tls_args_of(o.tls);
  if (!o.token_file.empty()) both.insert(both.end(), {"--token-file", o.token_file});
  if (o.spin_us >= 0) both.insert(both.end(), {"--spin-us", std::to_string(o.spin_us)});
  sched.args.insert(sched.args.end(), both.begin(), both.end());
  shared.insert(shared.end(), both.begin(), both.end());

  std::vector<LocalChild> children{std::move(sched)};
  const std::vector<std::string> visible = o.gpu_workers > 0 ? visible_gpus() : std::vector<std::string>{};
  const int n = o.gpu_workers > 0 ? o.gpu_workers : o.cpu_workers;
  for (int i = 0; i < n; ++i) children.push_back(worker_child(o, shared, visible, i, n));
  return children;
}

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

  const std::vector<LocalChild> children = local_cluster_children(o, scheduler_file_);
  for (const LocalChild& child : children) {
    psched::ChildSpec spec;
    spec.path = bin + "/" + child.binary;
    spec.args = child.args;
    spec.env = child.env;
    auto pid = spawn_registered(spec);
    if (!pid) return pid.status();
    pids_.push_back(*pid);
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
    if (WIFEXITED(status))
      return psched::Status::error(fmt::format("local {} exited with status {} (its error is above)", what,
                                               WEXITSTATUS(status)));
    return psched::Status::error(fmt::format("local {} was killed by signal {}", what, WTERMSIG(status)));
  }
  return psched::Status::ok();
}

void LocalCluster::stop() {
  // Workers first (they say goodbye), then the scheduler.
  for (size_t i = pids_.size(); i-- > 1;) kill(pids_[i], SIGTERM);
  for (size_t i = pids_.size(); i-- > 1;) psched::stop_child(pids_[i], 3000);
  if (!pids_.empty()) psched::stop_child(pids_[0], 3000);
  pids_.clear();
  unregister_all();
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    dir_.clear();
  }
}

}  // namespace pbench
