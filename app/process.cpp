#include "app/process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

namespace psched {

std::string self_exe_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n <= 0 ? std::string("/proc/self/exe") : std::string(buf, size_t(n));
}

std::string self_exe_dir() {
  const std::string path = self_exe_path();
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

StatusOr<pid_t> spawn_child(const ChildSpec& spec) {
  std::vector<std::string> argv_store;
  argv_store.push_back(spec.path);
  argv_store.insert(argv_store.end(), spec.args.begin(), spec.args.end());
  std::vector<char*> argv;
  for (auto& a : argv_store) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return Status::error(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    // Child: only async-signal-safe work from here to exec.
    if (spec.death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, spec.death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    }
    if (spec.own_process_group) setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    auto redirect = [](const std::string& path, int fd) {
      if (path.empty()) return;
      const int f = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (f >= 0) dup2(f, fd);
    };
    redirect(spec.stdout_path, 1);
    redirect(spec.stderr_path, 2);
    for (const auto& [k, v] : spec.env) setenv(k.c_str(), v.c_str(), 1);
    execv(spec.path.c_str(), argv.data());
    const char msg[] = "exec failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  return pid;
}

bool wait_child(pid_t pid, int timeout_ms, int* status) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int st = 0;
    const pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
      if (status) *status = st;
      return true;
    }
    if (r < 0 && errno != EINTR) {
      if (status) *status = 0;
      return true;  // not our child any more (already reaped)
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int stop_child(pid_t pid, int grace_ms) {
  kill(pid, SIGTERM);
  return reap_child(pid, grace_ms);
}

int reap_child(pid_t pid, int grace_ms) {
  int status = 0;
  if (wait_child(pid, grace_ms, &status)) return status;
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return status;
}

std::string describe_exit_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

}  // namespace psched
