// The live processes as /proc shows them, for tests that look for what pbench's local cluster
// started (its workers, by their command lines and parent). A process may end while /proc is read:
// its entry then fails to read (ESRCH: std::ifstream threw it as an exception, which failed CI
// once) and the process is left out, as if it had ended a moment sooner.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace psched::test {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  std::string cmdline;  // the arguments, each followed by one space (/proc's NULs)
};

// The whole of a /proc file, or nothing if it cannot be read to its end.
inline std::optional<std::string> read_proc_file(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, size_t(n));
  ::close(fd);
  if (n < 0) return std::nullopt;
  return text;
}

// Every process whose /proc entry reads whole, this one included.
inline std::vector<ProcessEntry> live_processes() {
  std::vector<ProcessEntry> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::optional<std::string> stat = read_proc_file(it->path() / "stat");
    std::optional<std::string> cmdline = read_proc_file(it->path() / "cmdline");
    if (!stat || !cmdline) continue;
    // stat: "pid (comm) state ppid ...", where comm may hold spaces and parentheses.
    const size_t paren = stat->rfind(')');
    if (paren == std::string::npos || paren + 2 > stat->size()) continue;
    std::istringstream fields(stat->substr(paren + 2));
    std::string state;
    ProcessEntry e;
    if (!(fields >> state >> e.parent)) continue;
    e.pid = pid_t(std::stol(name));
    std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
    e.cmdline = std::move(*cmdline);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace psched::test
