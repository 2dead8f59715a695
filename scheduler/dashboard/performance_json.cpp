#include "scheduler/dashboard/performance_json.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "core/worker_info_json.h"
#include "scheduler/scheduler.h"

namespace psched {

using nlohmann::json;

double since_from_query(std::string_view target) {
  const size_t q = target.find("since=");
  if (q == std::string_view::npos) return 0;
  const std::string text(target.substr(q + 6, 32));  // digits, at most: the rest is ignored
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() && std::isfinite(v) && v > 0 ? v : 0;
}

json task_stream_json(const Scheduler& s, double since_s) {
  json segments = json::array();
  for (const TaskSegment& t : s.task_stream().since(since_s, kMaxSegmentsServed))
    segments.push_back(task_segment_json(t.job, t.worker, t.first_chunk, t.chunks, t.start_s, t.end_s));
  json workers = json::object();
  for (const auto& [id, w] : s.workers()) workers[std::to_string(id)] = w->name;
  return {{"now", s.seconds_since_start()}, {"workers", std::move(workers)},
          {"segments", std::move(segments)}};
}

}  // namespace psched
