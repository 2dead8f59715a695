// What pbench prints about the cluster (cluster_report.h).
#include "cluster_report.h"

#include "core/worker_info_json.h"
#include "core/plural.h"

#include <cstdio>
#include <iostream>
#include <map>

namespace pbench {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB", "PB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 5) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f %s", bytes, units[u]);
  return buf;
}

void draw_progress(const pclient::Progress& p) {
  const int width = 40;
  const double f = p.chunks_total ? double(p.chunks_done) / double(p.chunks_total) : 1.0;
  const int filled = int(f * width);
  std::fprintf(stderr, "\r[%s%s] %3d%% %llu/%llu chunks", std::string(size_t(filled), '#').c_str(),
               std::string(size_t(width - filled), '.').c_str(), int(f * 100),
               (unsigned long long)p.chunks_done, (unsigned long long)p.chunks_total);
  std::fflush(stderr);
}

// "2 workers: 2 x cuda NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)" style, grouped by kind of device.
std::string summarize(const std::vector<pclient::WorkerInfo>& workers) {
  std::map<std::string, int> kinds;
  for (const auto& w : workers) {
    char buf[512];
    if (w.backend == "cuda") {
      std::snprintf(buf, sizeof(buf), "cuda %s (%.1f GiB, sm_%u%u)", w.device_name.c_str(),
                    double(w.memory_total_bytes) / double(1ull << 30), w.compute_major, w.compute_minor);
    } else {
      std::snprintf(buf, sizeof(buf), "cpu %s (%s)", w.device_name.c_str(), psched::counted(w.threads, "thread").c_str());
    }
    ++kinds[buf];
  }
  std::string out = psched::counted(workers.size(), "worker") + ":";
  bool first = true;
  for (const auto& [kind, n] : kinds) {
    out += (first ? " " : ", ") + std::to_string(n) + " x " + kind;
    first = false;
  }
  return out;
}

void print_workers(const std::vector<pclient::WorkerInfo>& workers, bool json) {
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& w : workers) list.push_back(psched::worker_info_json(w));
    std::cout << nlohmann::json{{"workers", list}}.dump() << std::endl;
    return;
  }
  std::printf("%s\n", summarize(workers).c_str());
  for (const auto& w : workers) {
    std::printf("  %-24s %-16s %-5s %s, %.1f GiB", w.name.c_str(), w.host.c_str(), w.backend.c_str(),
                w.device_name.c_str(), double(w.memory_total_bytes) / double(1ull << 30));
    if (w.backend == "cuda") std::printf(", compute %u.%u", w.compute_major, w.compute_minor);
    else std::printf(", %u threads", w.threads);
    std::printf(", window %u\n", w.slots);
  }
}

}  // namespace pbench
