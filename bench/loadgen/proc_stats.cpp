#include "proc_stats.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace psched::loadgen {

ProcSample sample_process(pid_t pid) {
  const std::string dir = pid == 0 ? "/proc/self" : "/proc/" + std::to_string(pid);
  ProcSample s;
  std::ifstream stat(dir + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return s;
  // Fields after the command name (which may hold spaces) start after the last ')'.
  std::istringstream rest(line.substr(line.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  s.cpu_seconds = double(utime + stime) / double(sysconf(_SC_CLK_TCK));
  // Scheduler statistics count nanoseconds (stat's ticks are 10 ms): sum them over the threads.
  // The second field is time spent runnable but not running: on a shared machine, what the
  // benchmark lost to other processes.
  double ns = 0, wait_ns = 0;
  bool any = false;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(dir + "/task", ec)) {
    std::ifstream schedstat(task.path() / "schedstat");
    unsigned long long on_cpu_ns = 0, waiting_ns = 0;
    if (schedstat >> on_cpu_ns >> waiting_ns) {
      ns += double(on_cpu_ns);
      wait_ns += double(waiting_ns);
      any = true;
    }
  }
  if (any) {
    s.cpu_seconds = ns * 1e-9;
    s.wait_seconds = wait_ns * 1e-9;
  }
  std::ifstream status(dir + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) s.rss_kb = std::stoull(line.substr(6));
    if (line.rfind("VmHWM:", 0) == 0) s.hwm_kb = std::stoull(line.substr(6));
  }
  s.ok = true;
  return s;
}

}  // namespace psched::loadgen
