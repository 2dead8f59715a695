// /api/status: the dashboard's JSON view of the scheduler (scheduler, workers, running and recent
// jobs, counters), written from a const Scheduler&. WorkerRates turns workers'
// cumulative counters into recent throughput and utilisation from samples the dashboard takes
// once a second, so the page shows what a worker does now, not its average since it joined.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <deque>
#include <map>
#include <string>

#include "scheduler/job.h"

namespace psched {

class Scheduler;
struct WorkerRecord;

class WorkerRates {
 public:
  struct Rate {
    double bytes_per_second = 0;
    double chunks_per_second = 0;
    double utilisation = -1;  // busy fraction of the worker's compute capacity; < 0: unknown
  };

  // Records every worker's counters at `now`; samples older than the window are dropped.
  void sample(const Scheduler& scheduler, std::chrono::steady_clock::time_point now);
  // Over the sampled window; before two samples exist, averaged since the worker joined.
  Rate rate(const WorkerRecord& worker, std::chrono::steady_clock::time_point now) const;

  static constexpr std::chrono::seconds kWindow{10};

 private:
  struct Sample {
    std::chrono::steady_clock::time_point at;
    uint64_t bytes_reduced = 0, chunks_done = 0;
    double busy_seconds = 0;
  };
  std::map<WorkerId, std::deque<Sample>> samples_;
};

// The /api/status document as JSON text, written as it goes (core/json_out.h): for thousands of
// workers and their jobs' device shares it is megabytes, and a document built first stalled
// psched's loop (bench/README.md). dashboard_url is reported back under
// scheduler.dashboard. Without `devices`, jobs[] and recent_jobs[] leave out their devices (a share
// per worker each: the page, which does not show them, asks for that, ?devices=0).
std::string status_json(const Scheduler& scheduler, const WorkerRates& rates, const std::string& dashboard_url,
                        bool devices = true);

// JSON text that never throws on odd bytes in peer-supplied names (invalid UTF-8 is replaced).
std::string dump_json(const nlohmann::json& j);

}  // namespace psched
