// PartialSum: what reducing the selected elements of one chunk (or a run of chunks) yields, and the
// one way two of them combine. The sum is carried exactly (ExactSum, core/exact_sum.h): merging
// is exact and commutative, so a job's bits never depend on arrival order, worker count, chunking
// or backend; `sum` is that exact sum rounded once.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/exact_sum.h"
#include "core/platform.h"

namespace psched {

struct PartialSum {
  double sum = 0.0;  // exact.rounded(): the correctly rounded sum of the selected elements
  uint64_t count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  ExactSum exact;  // the exact sum of the selected elements (and their NaN/inf counts)
  // Only for a job that asks for var/std (JobSpec::squares): the exact sum of the elements'
  // squares, each square x*x split exactly into two doubles (x*x and fma(x, x, -x*x)).
  bool has_squares = false;
  ExactSum squares;
};

// A partial in the form a worker reports it (ChunkPartial): the exact sum as its terms. A worker
// carries one per finished chunk from its backend to the wire, ~110 bytes where a PartialSum is
// ~590 (chunks of a few elements finish by the million per second). `sum` is exact.rounded().
struct CompactPartial {
  double sum = 0.0;
  uint64_t count = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  ExactTerms exact;
  bool has_squares = false;
  ExactTerms squares;  // as PartialSum::squares
};
CompactPartial compact(const PartialSum& p);
PartialSum expand(const CompactPartial& p);

// Adds p into `into`: exact sum merged (and normalised, so any number of merges is safe), count
// added, min/max taken, sum rounded again.
void merge(PartialSum& into, const PartialSum& p);

// Bit for bit: sum, count, min, max (their bit patterns, so -0 != +0 and NaN == the same NaN) and
// the exact sum after normalisation (digits and special counts).
bool same_bits(const PartialSum& a, const PartialSum& b);
// How `copy` differs from `first` (verify reports), since two sums that differ in their last bits
// round alike: "exact sum -1.1102230246251565e-16 from the first copy's", or the count, min or max
// that differ; "" when none does.
std::string difference_from(const PartialSum& copy, const PartialSum& first);

}  // namespace psched
