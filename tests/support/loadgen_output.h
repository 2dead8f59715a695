// What the fleet tests share (tests/e2e/fleet_test.cpp, fleet_faults_test.cpp): starting
// psched-loadgen beside a TestCluster and reading what it prints (its "jobs:" line and its
// "figure NAME VALUE" lines), and psched's memory limits under test.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "app/process.h"
#include "support/test_cluster.h"

namespace psched::test {

#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kSchedulerPeakLimitKb = 512 * 1024;  // ASan's shadow and quarantine
constexpr int64_t kSchedulerBytesPerWorkerLimit = 64 * 1024;
#else
constexpr uint64_t kSchedulerPeakLimitKb = 64 * 1024;
constexpr int64_t kSchedulerBytesPerWorkerLimit = 16 * 1024;  // measured: ~2 KB (bench/README.md)
#endif

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct JobCounts {
  uint64_t submitted = 0, exact = 0, failed = 0, mismatched = 0;
};

// The loadgen's "jobs: S submitted, X exact, F failed, M mismatched" line. (No std::regex: GCC 12
// warns inside <regex> in the sanitized build.)
inline JobCounts job_counts(const std::string& out) {
  JobCounts c;
  const size_t at = out.find("jobs: ");
  if (at == std::string::npos) return c;
  unsigned long long s = 0, x = 0, f = 0, m = 0;
  if (std::sscanf(out.c_str() + at, "jobs: %llu submitted, %llu exact, %llu failed, %llu mismatched", &s, &x,
                  &f, &m) == 4)
    c = {s, x, f, m};
  return c;
}

// The value of a loadgen "figure NAME VALUE" line; nullopt when absent.
inline std::optional<std::string> figure(const std::string& out, const std::string& name) {
  const std::string key = "figure " + name + " ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t end = out.find('\n', at);
  return out.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

inline uint64_t peak_rss_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}

inline pid_t start_loadgen(const TestCluster& cluster, const std::vector<std::string>& args, const std::string& out) {
  psched::ChildSpec spec;
  spec.path = bin_dir() + "/psched-loadgen";
  spec.args = {"--scheduler", cluster.address()};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.stdout_path = spec.stderr_path = out;
  spec.death_signal = SIGKILL;
  auto pid = psched::spawn_child(spec);
  REQUIRE(pid);
  return *pid;
}

}  // namespace psched::test
