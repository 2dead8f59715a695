// A worker's partial checked against the range it answers, before the scheduler takes any of it: a
// worker that lies (a broken or hostile peer) must not poison an exact result. What a partial must
// be follows from the job's geometry and the exact sum's rules alone, so the check costs O(1) per
// partial whatever its range. A wrong but plausible sum passes; only --verify finds those.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "core/job_spec.h"
#include "scheduler/range_table.h"

namespace psched {

// A var/std job's sum of squares as a worker sent it (ChunkPartial.squares).
struct ReportedSquares {
  bool present = false;
  uint32_t nan = 0, pos_inf = 0, neg_inf = 0;
  size_t terms = 0;
  size_t bad_term = SIZE_MAX;
  double bad_term_value = 0;
  double first = 0;  // the first term: the whole sum rounded (0 with no terms)
};

// A ChunkPartial as a worker sent it, nothing of it trusted yet.
struct ReportedPartial {
  ChunkRange range;  // inside the job's chunks (checked before)
  double sum = 0;
  uint64_t count = 0;
  double min = 0, max = 0;
  uint32_t nan = 0, pos_inf = 0, neg_inf = 0;  // the exact sum's special counts
  size_t terms = 0;                            // the exact sum's terms
  size_t bad_term = SIZE_MAX;                  // the first term that is NaN or infinite, if any
  double bad_term_value = 0;
  ReportedSquares squares;
};

// Why `p` cannot be the partial of its range of `spec` (normalized), or "" if it can. It must count
// exactly the selection's elements in its chunks (selected_elements(): NaN ones too, which is also
// the most it could count), its exact terms must be finite (NaN and infinite elements go to the
// special counts, never into terms; a stored float array's sum past DBL_MAX is the one exception,
// one infinite term alone), the special counts must fit in the count, its min must not
// exceed its max once it has an element that is not NaN (NaN stays out of min and max, so a range
// of NaN alone keeps +inf and -inf), and its rounded sum is finite unless the special counts say
// why not. It carries squares exactly when the job asked for them (JobSpec::squares), and then
// they are a sum of squares: finite terms (or one +inf alone, a sum past DBL_MAX), not negative, a
// NaN square per NaN element, no -inf, and a +inf square for every infinite element and at most one
// per element that is not NaN (a square that overflowed).
std::string untrue_partial(const JobSpec& spec, const ReportedPartial& p);

// The terms' part of a ReportedPartial or its ReportedSquares, from any list of doubles (the
// wire's, a vector).
template <typename Terms, typename Reported>
void note_terms(const Terms& terms, Reported& p) {
  p.terms = 0;
  p.bad_term = SIZE_MAX;
  for (const double t : terms) {
    if (p.bad_term == SIZE_MAX && !std::isfinite(t)) {
      p.bad_term = p.terms;
      p.bad_term_value = t;
    }
    if constexpr (std::is_same_v<Reported, ReportedSquares>)
      if (p.terms == 0) p.first = t;
    ++p.terms;
  }
}

}  // namespace psched
