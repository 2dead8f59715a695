#include "scheduler/task_stream.h"

#include <algorithm>

#include "core/check.h"

namespace psched {

TaskStream::TaskStream(size_t capacity) : ring_(capacity) {
  PSCHED_REQUIRE(capacity > 0, capacity);
}

void TaskStream::record(const TaskSegment& segment) {
  ring_[next_] = segment;
  next_ = (next_ + 1) % ring_.size();
  size_ = std::min(size_ + 1, ring_.size());
  ++recorded_;
}

std::vector<TaskSegment> TaskStream::since(double since_s, size_t limit, JobId job) const {
  // Walk from the newest back: segments are recorded in arrival order, so end_s only decreases.
  std::vector<TaskSegment> out;
  for (size_t k = 0; k < size_ && out.size() < limit; ++k) {
    const TaskSegment& s = ring_[(next_ + ring_.size() - 1 - k) % ring_.size()];
    if (s.end_s <= since_s) break;
    if (job == 0 || s.job == job) out.push_back(s);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace psched
