// The processes of a local cluster, psched first, as pbench's local mode (-c N / -g N) and the
// Python LocalCluster (python/psched/cluster.py) both start them: the one description of what they
// are. Starting and stopping them is each starter's (client/pbench/local_cluster.h, cluster.py).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "net/tls.h"

namespace pclient {

struct LocalClusterOptions {
  int cpu_workers = 0;   // pbench -c N
  int gpu_workers = 0;   // pbench -g N: one worker per GPU 0..N-1
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

}  // namespace pclient
