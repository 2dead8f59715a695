// Child processes as pbench's local mode and the GPU supervisor use them: started with fork+exec,
// tied to the parent's life (PR_SET_PDEATHSIG: a parent killed with -9 takes its children along),
// and stopped by pid, never by name.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace psched {

// The running executable's path (resolved, so a child started from it keeps the binary's name for
// killall and pkill -x), and its directory (to find siblings: psched next to pbench).
std::string self_exe_path();
std::string self_exe_dir();

struct ChildSpec {
  std::string path;
  std::vector<std::string> args;              // without argv[0]
  std::map<std::string, std::string> env;     // added to / overriding the parent's environment
  int death_signal = 15;                      // sent to the child when the parent dies; 0: none
  std::string stdout_path, stderr_path;       // empty: inherit
  // A process group of its own: a terminal's Ctrl-C (sent to the whole foreground group) then
  // reaches only the parent, which decides (the Python client cancels a job, keeping its cluster).
  bool own_process_group = false;
};

StatusOr<pid_t> spawn_child(const ChildSpec& spec);

// waitpid with a deadline: true and *status when the child exited within timeout_ms.
bool wait_child(pid_t pid, int timeout_ms, int* status);

// SIGTERM, then SIGKILL after grace_ms; reaps the child. Returns its wait status.
int stop_child(pid_t pid, int grace_ms);

// For a child already sent SIGTERM (several stopped at once): waits, SIGKILL after grace_ms; reaps
// it. Never a second SIGTERM: to pcuda-worker that means "end at once", cutting its stop short.
int reap_child(pid_t pid, int grace_ms);

// A wait status in words: "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_exit_status(int status);

}  // namespace psched
