// What a process costs, read from /proc: CPU seconds so far and resident memory now and at peak.
// psched-loadgen samples psched (by pid) and itself around each measured phase.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace psched::loadgen {

struct ProcSample {
  bool ok = false;
  double cpu_seconds = 0;   // user + system
  double wait_seconds = 0;  // runnable but waiting for a CPU (other processes held them)
  uint64_t rss_kb = 0;     // VmRSS
  uint64_t hwm_kb = 0;     // VmHWM: peak resident
};

ProcSample sample_process(pid_t pid);  // pid 0: this process

}  // namespace psched::loadgen
