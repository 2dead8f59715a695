// LocalCluster: pbench's local mode (-c N / -g N). Starts psched and N workers as child processes
// on loopback (local_cluster_children: what they are, shared with the Python LocalCluster), waits
// until they are registered, and stops them by pid on destruction, on Ctrl-C (a signal handler
// forwards SIGTERM to them) and, through PR_SET_PDEATHSIG, when pbench is killed.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "client/local_cluster_children.h"
#include "core/status.h"

namespace pbench {

// The children's description is libpclient's (client/local_cluster_children.h), shared with Python.
using pclient::LocalChild;
using pclient::LocalClusterOptions;

class LocalCluster {
 public:
  LocalCluster() = default;
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;
  ~LocalCluster();

  psched::Status start(const LocalClusterOptions& options);
  const std::string& scheduler_file() const { return scheduler_file_; }
  int workers() const { return workers_; }
  // An error naming the first child that has exited (a worker that could not start), if any.
  psched::Status check_children();
  // The workers whose process ended since the last call, reaped: their name and how they ended
  // ("killed by signal 9 (Killed)"), a lost worker's cause that psched cannot know (it sees only
  // the connection close). The burn's watcher asks once a second.
  struct WorkerExit {
    std::string name;
    pid_t pid = -1;
    std::string how;
  };
  std::vector<WorkerExit> reap_exited_workers();
  // Stops the workers, then the scheduler (SIGTERM, SIGKILL after a grace period).
  void stop();

 private:
  std::vector<pid_t> pids_;  // scheduler first
  std::vector<std::string> names_;  // each child's --name ("" for psched), as pids_
  std::string dir_, scheduler_file_;
  int workers_ = 0;
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that stop every started child (none with -d), say so on
// stderr and exit 128 + the signal.
void install_cleanup_handlers();

}  // namespace pbench
