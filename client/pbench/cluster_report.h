// What pbench prints about the cluster and each worker's share of a run: sizes for people, the
// progress bar, the devices as JSON, the one-line cluster summary and the worker list. main.cpp
// parses, runs and reports; this holds the pieces the reports share.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pclient/client.h"

namespace pbench {

// "1.82 TB"-style sizes (powers of 1000, as DeepOps' sum.py prints them).
std::string human_bytes(double bytes);
// The terminal progress bar of a running job (stderr).
void draw_progress(const pclient::Progress& p);

// What a client last said about its job having no worker (Progress::no_workers), so that it says
// so at once, again every 10 s while it lasts, and once more when a worker joins.
struct WorkersShown {
  bool none = false;
  std::chrono::steady_clock::time_point since, last_said;
};
// The line to show a person for this progress ("" when nothing is new): pbench and the Python
// client say the same words.
std::string workers_state_line(const pclient::Progress& p, WorkersShown& shown);

// What worker w did in the last run: `before` holds the workers just before it (one that joined
// since counts from zero). busy_fraction is busy / wall per unit of compute (a CPU worker's busy
// time is summed over its threads).
struct RunShare {
  uint64_t chunks = 0;
  double busy_seconds = 0, busy_fraction = 0;
};
RunShare run_share(const pclient::WorkerInfo& w, const std::vector<pclient::WorkerInfo>& before,
                   double seconds);

// The workers as JSON (psched::worker_info_json's keys, as psched's /api/status has them); with
// `before` and the last run's wall seconds, each device also gets its share of that run.
nlohmann::json devices_json(const std::vector<pclient::WorkerInfo>& workers,
                            const std::vector<pclient::WorkerInfo>* before = nullptr, double seconds = 0);
// How each worker did in a job, as the scheduler reported it: throughput, busy share of the job's
// time, straggler and cause, and its GPU's min/mean/max figures (null without NVML).
nlohmann::json run_devices_json(const pclient::Result& result);
// "2 workers: 2 x cuda NVIDIA H100 80GB HBM3 (79.1 GiB, sm_90)" style, grouped by kind of device.
std::string summarize(const std::vector<pclient::WorkerInfo>& workers);
// --cluster-info: the workers, as text or JSON.
void print_workers(const std::vector<pclient::WorkerInfo>& workers, bool json);

}  // namespace pbench
