// The JSON of what performance.cpp records, for /api/status and /api/task-stream: a job's devices
// with stragglers marked, the task stream's recent segments. (A GPU's health: core/worker_info_json.h.)
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>
#include <vector>

#include "scheduler/job_devices.h"

namespace psched {

class Scheduler;

nlohmann::json devices_json(const std::vector<DeviceShare>& shares);
// Segments that ended after since_s (scheduler seconds), the newest kMaxSegmentsServed of them:
// {"now": S, "segments": [[job, worker, first_chunk, chunks, start_s, end_s], ...]}.
nlohmann::json task_stream_json(const Scheduler& s, double since_s);

// The `since` of a request target "/api/task-stream?since=12.5" (0 when absent or not a number).
double since_from_query(std::string_view target);

// One poll of the dashboard draws at most this many segments (about 200 kB of JSON).
constexpr size_t kMaxSegmentsServed = 5000;

}  // namespace psched
