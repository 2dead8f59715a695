// The JSON of what performance.cpp records for /api/task-stream: the task stream's recent segments.
// (A job's devices with stragglers marked: status_json.cpp; a GPU's health: core/worker_info_json.h.)
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string_view>

namespace psched {

class Scheduler;

// Segments that ended after since_s (scheduler seconds), the newest kMaxSegmentsServed of them:
// {"now": S, "segments": [[job, worker, first_chunk, chunks, start_s, end_s], ...]}.
nlohmann::json task_stream_json(const Scheduler& s, double since_s);

// The `since` of a request target "/api/task-stream?since=12.5" (0 when absent or not a number).
double since_from_query(std::string_view target);

// One poll of the dashboard draws at most this many segments (about 200 kB of JSON).
constexpr size_t kMaxSegmentsServed = 5000;

}  // namespace psched
