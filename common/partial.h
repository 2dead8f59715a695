// PartialSum: what reducing the selected elements of one chunk (or a run of chunks) yields, and the
// one way two of them combine. The scheduler combines chunk partials in chunk-index order with a fixed
// pairwise tree (combine_in_order), so a job's bits never depend on arrival order or worker count.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "common/platform.h"

namespace psched {

struct PartialSum {
  double sum = 0.0;
  uint64_t count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
};

PSCHED_HD PartialSum combine(const PartialSum& a, const PartialSum& b) {
  PartialSum r;
  r.sum = a.sum + b.sum;
  r.count = a.count + b.count;
  r.min = a.min < b.min ? a.min : b.min;
  r.max = a.max > b.max ? a.max : b.max;
  return r;
}

// Whether two partials of the same chunk are identical in every bit of every field (not ==: -0.0
// and 0.0 differ, and a NaN equals itself bit for bit). Verify (scheduler/verify.h) compares the
// copies of a chunk with this and nothing else: a field added to PartialSum is compared here.
bool same_bits(const PartialSum& a, const PartialSum& b);

// Pairwise tree over partials[0..n) in index order: a fixed shape for a given n, so the result is a
// pure function of the chunk partials.
PartialSum combine_in_order(const std::vector<PartialSum>& partials);

}  // namespace psched
