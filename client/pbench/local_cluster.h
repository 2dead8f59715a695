// LocalCluster: pbench's local mode (-c N / -g N). Starts psched and N workers as child processes
// on loopback (local_cluster_children: what they are, shared with the Python LocalCluster), waits
// until they are registered, and stops them by pid on destruction, on Ctrl-C (a signal handler
// forwards SIGTERM to them) and, through PR_SET_PDEATHSIG, when pbench is killed.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "net/tls.h"

namespace pbench {

struct LocalClusterOptions {
  int cpu_workers = 0;   // -c N
  int gpu_workers = 0;   // -g N: one worker per GPU 0..N-1
  int threads_per_worker = 0;  // cpu: 0 = cores / N
  std::string memory_limit;    // passed to the workers
  std::string log_level = "warning";
  int spin_us = -1;      // the daemons' --spin-us (-1: their default)
  std::string bin_dir;   // where psched and pcuda-worker live (default: next to pbench)
  psched::TlsFiles tls;  // mutual TLS: the same CA, certificate and key for psched and every worker
  std::string token_file;                  // psched and the workers' --token-file ("": none)
  std::string dashboard_address = "none";  // psched's --dashboard-address
};

// One process of a local cluster: the binary's name, its arguments and extra environment.
struct LocalChild {
  std::string binary;  // psched or pcuda-worker
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
};

// The processes of a local cluster, psched first: the one description of them, which pbench's
// local mode and the Python LocalCluster (python/psched/cluster.py) both start.
std::vector<LocalChild> local_cluster_children(const LocalClusterOptions& options, const std::string& scheduler_file);

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
  // Stops the workers, then the scheduler (SIGTERM, SIGKILL after a grace period).
  void stop();

 private:
  std::vector<pid_t> pids_;  // scheduler first
  std::string dir_, scheduler_file_;
  int workers_ = 0;
};

// Installs SIGINT/SIGTERM/SIGHUP handlers that stop every started child (none with -d), say so on
// stderr and exit 128 + the signal.
void install_cleanup_handlers();

}  // namespace pbench
