#include "scheduler/partial_check.h"

#include <fmt/format.h>

#include <cmath>

#include "core/chunk_runs.h"
#include "core/plural.h"

namespace psched {

std::string untrue_partial(const JobSpec& spec, const ReportedPartial& p) {
  const uint64_t selected = selected_elements(spec, p.range.first, p.range.count);
  if (p.count != selected)
    return fmt::format("count {}, but the selection has {} there", p.count, counted(selected, "element"));
  // One infinite term alone is how terms() says a finite part passed DBL_MAX: only a stored float
  // array's sum may (validate() refuses every other job whose sum could), as numpy's would.
  const bool overflowed = p.terms == 1 && p.bad_term == 0 && std::isinf(p.bad_term_value) &&
                          spec.stored.stored() && is_float(spec.dtype);
  if (p.bad_term != SIZE_MAX && !overflowed)
    return fmt::format("exact sum term {} of {} is {} (NaN and infinite elements are counted, never added)",
                       p.bad_term + 1, p.terms, p.bad_term_value);
  const uint64_t specials = uint64_t(p.nan) + p.pos_inf + p.neg_inf;
  if (specials > p.count)
    return fmt::format("{} NaN and infinite elements among {} counted", specials, p.count);
  if (p.count > p.nan && !(p.min <= p.max))
    return fmt::format("min {} above max {} with {} counted", p.min, p.max, p.count);
  if (specials == 0 && !overflowed && !std::isfinite(p.sum))
    return fmt::format("sum {} of finite elements", p.sum);
  return {};
}

}  // namespace psched
