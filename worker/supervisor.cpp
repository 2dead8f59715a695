#include "worker/supervisor.h"

#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <deque>
#include <vector>

#include "app/exit_codes.h"

namespace psched {
namespace {

using Clock = std::chrono::steady_clock;

struct ChildState {
  SupervisedChild child;
  pid_t pid = -1;
  bool done = false;                   // exited cleanly or gave up
  std::deque<Clock::time_point> restarts;
  Clock::time_point restart_at{};      // pending restart time when pid < 0 && !done
};

void start(ChildState& c) {
  auto pid = spawn_child(c.child.spec);
  if (!pid) {
    spdlog::error("{}: cannot start: {}", c.child.label, pid.message());
    c.done = true;
    return;
  }
  c.pid = *pid;
  spdlog::info("{}: started worker process {}", c.child.label, c.pid);
}

// A child exited with `status`: done if it was clean or we are stopping, else restarted after a
// backoff unless it has used up its restarts.
void on_exit(ChildState& s, pid_t pid, int status, bool stopping, const SupervisorOptions& options) {
  s.pid = -1;
  const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (stopping || clean) {
    spdlog::info("{}: worker process {} {}", s.child.label, pid, describe_exit_status(status));
    s.done = true;
    return;
  }
  const auto now = Clock::now();
  while (!s.restarts.empty() &&
         now - s.restarts.front() > std::chrono::seconds(options.restart_window_s))
    s.restarts.pop_front();
  if (int(s.restarts.size()) >= options.max_restarts) {
    spdlog::error("{}: worker process {} {}; restarted {} times in {} s, giving up", s.child.label,
                  pid, describe_exit_status(status), s.restarts.size(), options.restart_window_s);
    s.done = true;
    return;
  }
  const auto backoff = std::chrono::milliseconds(250 << std::min<size_t>(s.restarts.size(), 4));
  s.restarts.push_back(now);
  s.restart_at = now + backoff;
  spdlog::warn("{}: worker process {} {}; restarting in {} ms", s.child.label, pid,
               describe_exit_status(status), backoff.count());
}

void reap_exited(std::vector<ChildState>& states, bool stopping, const SupervisorOptions& options) {
  for (;;) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (auto& s : states) {
      if (s.pid == pid) {
        on_exit(s, pid, status, stopping, options);
        break;
      }
    }
  }
}

// Starts the restarts that are due; returns when the next one is (at most a second away).
Clock::time_point start_due(std::vector<ChildState>& states) {
  auto next_wake = Clock::now() + std::chrono::seconds(1);
  for (auto& s : states) {
    if (s.done || s.pid >= 0) continue;
    if (Clock::now() >= s.restart_at) {
      start(s);
    } else {
      next_wake = std::min(next_wake, s.restart_at);
    }
  }
  return next_wake;
}

// The first SIGTERM/SIGINT/SIGHUP: forwarded to every child, whatever is left after the grace period is
// killed (the wait is bounded).
void stop_all(std::vector<ChildState>& states, int sig, const SupervisorOptions& options) {
  spdlog::info("{}: stopping {} worker processes", strsignal(sig), states.size());
  for (auto& s : states) {
    if (s.pid > 0) kill(s.pid, sig);
    if (s.pid < 0) s.done = true;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(options.stop_grace_ms);
  for (auto& s : states) {
    if (s.pid <= 0) continue;
    int status = 0;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (!wait_child(s.pid, int(std::max<int64_t>(left.count(), 0)), &status)) {
      spdlog::warn("{}: worker process {} did not stop in time; killing it", s.child.label, s.pid);
      kill(s.pid, SIGKILL);
      waitpid(s.pid, &status, 0);
    }
    s.pid = -1;
    s.done = true;
  }
}

void kill_all(std::vector<ChildState>& states) {
  spdlog::warn("second signal: killing worker processes");
  for (auto& s : states)
    if (s.pid > 0) kill(s.pid, SIGKILL);
  for (auto& s : states)
    if (s.pid > 0) waitpid(s.pid, nullptr, 0);
}

}  // namespace

int run_supervisor(std::vector<SupervisedChild> children, const SupervisorOptions& options) {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, nullptr);

  std::vector<ChildState> states;
  for (auto& c : children) {
    ChildState state;
    state.child = std::move(c);
    states.push_back(std::move(state));
  }
  for (auto& s : states) start(s);

  int stop_signal = 0;
  for (;;) {
    reap_exited(states, stop_signal != 0, options);
    const bool all_done = std::all_of(states.begin(), states.end(),
                                      [](const ChildState& s) { return s.done && s.pid < 0; });
    if (all_done) break;

    auto next_wake = Clock::now() + std::chrono::seconds(1);
    if (stop_signal == 0) {
      next_wake = start_due(states);
    } else {
      for (auto& s : states)
        if (s.pid < 0) s.done = true;
    }

    const auto wait = std::max<Clock::duration>(next_wake - Clock::now(), std::chrono::milliseconds(1));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    const int sig = sigtimedwait(&mask, nullptr, &ts);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) {
      if (stop_signal != 0) {
        kill_all(states);
        return kExitFailure;
      }
      stop_signal = sig;
      stop_all(states, sig, options);
    }
  }
  return 0;
}

}  // namespace psched
