// Supervisor: with several GPUs (or --nworkers), the pcuda-worker parent runs one worker process
// per device and watches them: signals are forwarded, a child that crashes is restarted with
// backoff (at most max_restarts within a minute), and children die with the parent
// (PR_SET_PDEATHSIG), also when the parent is killed with -9.
#pragma once

#include <string>
#include <vector>

#include "app/process.h"

namespace psched {

struct SupervisedChild {
  std::string label;  // e.g. "gpu 1"
  ChildSpec spec;
};

struct SupervisorOptions {
  int max_restarts = 5;        // per child, within restart_window_s
  int restart_window_s = 60;
  int stop_grace_ms = 5000;    // after forwarding SIGTERM, SIGKILL what is left
};

// Runs until every child has exited cleanly (status 0) or given up, or a signal stops them all.
// Returns the process exit code.
int run_supervisor(std::vector<SupervisedChild> children, const SupervisorOptions& options);

}  // namespace psched
