// The task stream: which worker computed which chunks of which job, from when to when, for the
// dashboard's live lanes and pbench's report. One segment per ResultBatch, timed on the scheduler's
// own clock (no skew between hosts): it ends when the batch arrived and starts the batch's device
// time earlier (its busy seconds over the worker's parallelism). Held in a ring of fixed size, so
// memory stays the same however many chunks run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduler/job.h"

namespace psched {

struct TaskSegment {
  JobId job = 0;
  WorkerId worker = 0;
  uint64_t first_chunk = 0;  // the lowest chunk of the batch
  uint32_t chunks = 0;       // chunks the batch finished
  double start_s = 0, end_s = 0;  // seconds since the scheduler started
};

// Enough for a minute of the busiest cluster we measured (bench/README.md: ~1000 result batches a
// second) at 40 bytes each: 2.6 MB, allocated once.
constexpr size_t kTaskStreamSegments = size_t{1} << 16;

class TaskStream {
 public:
  explicit TaskStream(size_t capacity = kTaskStreamSegments);

  void record(const TaskSegment& segment);
  // The segments that ended after since_s (oldest first), at most `limit` of the newest; of one
  // job when job != 0.
  std::vector<TaskSegment> since(double since_s, size_t limit, JobId job = 0) const;

  size_t size() const { return size_; }
  size_t capacity() const { return ring_.size(); }
  uint64_t recorded() const { return recorded_; }  // ever, including those overwritten
  size_t memory_bytes() const { return ring_.capacity() * sizeof(TaskSegment); }

 private:
  std::vector<TaskSegment> ring_;
  size_t next_ = 0, size_ = 0;
  uint64_t recorded_ = 0;
};

}  // namespace psched
