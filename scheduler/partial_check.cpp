#include "scheduler/partial_check.h"

#include <fmt/format.h>

#include <cmath>

#include "core/chunk_runs.h"
#include "core/plural.h"

namespace psched {

namespace {

// Why p.squares cannot be the sum of squares of p's elements, or "" if it can.
std::string untrue_squares(const ReportedPartial& p) {
  const ReportedSquares& q = p.squares;
  const bool overflowed = q.terms == 1 && q.bad_term == 0 && q.bad_term_value > 0 && std::isinf(q.bad_term_value);
  if (q.bad_term != SIZE_MAX && !overflowed)
    return fmt::format("sum of squares term {} of {} is {}", q.bad_term + 1, q.terms, q.bad_term_value);
  if (!(q.first >= 0)) return fmt::format("sum of squares {} is negative", q.first);
  if (q.neg_inf != 0) return fmt::format("{} squares of -inf (a square is never negative)", q.neg_inf);
  if (q.nan != p.nan) return fmt::format("{} NaN squares but {} NaN elements", q.nan, p.nan);
  const uint64_t infinite = uint64_t(p.pos_inf) + p.neg_inf, not_nan = p.count - p.nan;
  if (q.pos_inf < infinite || q.pos_inf > not_nan)
    return fmt::format("{} infinite squares of {} infinite and {} other elements", q.pos_inf, infinite,
                       not_nan - infinite);
  return {};
}

}  // namespace

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
  if (p.squares.present != spec.squares)
    return spec.squares ? "no sum of squares in a partial of a var/std job"
                        : "a sum of squares in a partial of a job that asked for none";
  if (p.squares.present) return untrue_squares(p);
  return {};
}

}  // namespace psched
