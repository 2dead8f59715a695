// ChunkRange: chunks first .. first + count - 1 of one job, the unit in which the scheduler keeps
// where a job's chunks stand (scheduler/range_table.h) and in which a worker gives back what it
// has not started (worker/backend.h): one type for both sides.
#pragma once

#include <cstdint>

namespace psched {

struct ChunkRange {
  uint64_t first = 0;
  uint64_t count = 0;
  uint64_t end() const { return first + count; }
  bool operator==(const ChunkRange& o) const { return first == o.first && count == o.count; }
};

}  // namespace psched
