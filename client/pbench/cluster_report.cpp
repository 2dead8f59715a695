// What pbench prints about the cluster and about each worker's share of a run (cluster_report.h).
#include "cluster_report.h"

#include "core/gpu_health.h"
#include "core/worker_info_json.h"
#include "core/plural.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <algorithm>
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

std::string workers_state_line(const pclient::Progress& p, WorkersShown& shown) {
  const auto now = std::chrono::steady_clock::now();
  const uint64_t left = p.chunks_total - p.chunks_done;
  if (!p.no_workers) {
    const bool was_none = shown.none;
    shown.none = false;
    return was_none ? fmt::format("a worker joined: the job goes on ({} left)", psched::counted(left, "chunk")) : "";
  }
  if (!shown.none) {
    shown = {true, now, now};
    return fmt::format("no workers: waiting for one to join, {} left", psched::counted(left, "chunk"));
  }
  if (now - shown.last_said < std::chrono::seconds(10)) return "";
  shown.last_said = now;
  return fmt::format("still no workers after {:.0f} s: waiting for one to join, {} left",
                     std::chrono::duration<double>(now - shown.since).count(), psched::counted(left, "chunk"));
}

RunShare run_share(const pclient::WorkerInfo& w, const std::vector<pclient::WorkerInfo>& before, double seconds) {
  RunShare r{w.chunks_done, w.busy_seconds, 0};
  for (const auto& b : before)
    if (b.id == w.id) {
      r.chunks -= b.chunks_done;
      r.busy_seconds -= b.busy_seconds;
    }
  if (seconds > 0) r.busy_fraction = r.busy_seconds / seconds / std::max<uint32_t>(1, w.threads);
  return r;
}

nlohmann::json devices_json(const std::vector<pclient::WorkerInfo>& workers,
                            const std::vector<pclient::WorkerInfo>* before, double seconds) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& w : workers) {
    nlohmann::json d = psched::worker_info_json(w);
    if (before && seconds > 0) {
      const RunShare r = run_share(w, *before, seconds);
      d["run_chunks"] = r.chunks;
      d["run_busy_seconds"] = r.busy_seconds;
      d["run_busy_fraction"] = r.busy_fraction;
    }
    list.push_back(d);
  }
  return list;
}

namespace {

// [[seconds, SM clock MHz, temperature C, power W, SM utilisation %], ...]: compact for the report.
nlohmann::json series_json(const std::vector<pclient::DeviceReport::Point>& series) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : series)
    out.push_back({std::round(p.seconds * 1e3) / 1e3, p.sm_clock_mhz, p.temperature_c, p.power_watts,
                   p.sm_utilisation_pct});
  return out;
}

}  // namespace

nlohmann::json run_devices_json(const pclient::Result& result) {
  auto figure = [](const pclient::Figure& f) {
    return nlohmann::json{{"min", f.min}, {"mean", f.mean}, {"max", f.max}};
  };
  const double span = result.scheduler_seconds > 0 ? result.scheduler_seconds : result.wall_seconds;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& d : result.devices) {
    const double device_seconds = d.bytes_per_second > 0 ? double(d.bytes) / d.bytes_per_second : 0;
    nlohmann::json j = psched::device_share_json(d);
    j["busy_share"] = span > 0 ? device_seconds / span : 0.0;
    j["gpu"] = nullptr;
    if (d.has_gpu)
      j["gpu"] = {{"uuid", d.uuid},
                  {"sm_clock_mhz", figure(d.sm_clock_mhz)},
                  {"sm_clock_max_mhz", d.sm_clock_max_mhz},
                  {"temperature_c", figure(d.temperature_c)},
                  {"power_watts", figure(d.power_watts)},
                  {"sm_utilisation_pct", figure(d.sm_utilisation_pct)},
                  {"throttle_reasons", d.throttle_reasons},
                  {"throttle", psched::throttle_reason_names(d.throttle_reasons)},
                  {"series", series_json(d.series)}};
    list.push_back(std::move(j));
  }
  return list;
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
    std::cout << nlohmann::json{{"workers", devices_json(workers)}}.dump() << std::endl;
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

// Everything the command line sets.

}  // namespace pbench
