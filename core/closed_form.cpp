#include "core/closed_form.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/chunk_grid.h"
#include "core/chunk_runs.h"

namespace psched {
namespace {

bool is_integer(double v) { return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9e15; }

constexpr double kTwo53 = 9007199254740992.0;
constexpr double kUnitRoundoff = 1.0 / kTwo53;            // float64: 2^-53
constexpr double kFloat32Roundoff = 1.0 / 16777216.0;     // float32: 2^-24

// Selected elements in one chunk, at most: the selected rows a chunk's rows can hold, times the
// columns.
uint64_t max_selected_per_chunk(const JobSpec& s, uint64_t selected_rows, uint64_t selected_cols) {
  const uint64_t r = std::min(selected_rows, s.chunk_rows / s.row_sel.step + 1);
  const uint64_t c = std::min(selected_cols, s.chunk_cols / s.col_sel.step + 1);
  return r * c;
}

// k * 2^exponent as an exact sum, O(1): three pieces of 52 bits, each a double exactly (exponent >=
// -1074 keeps the lowest piece representable; the totals validate() allows keep the highest finite).
ExactSum exact_scaled(__int128 k, int exponent) {
  ExactSum e;
  const bool negative = k < 0;
  unsigned __int128 u = negative ? -(unsigned __int128)k : (unsigned __int128)k;
  for (int piece = 0; u != 0; ++piece, u >>= 52) {
    const double v = std::ldexp(double(uint64_t(u & ((uint64_t{1} << 52) - 1))), 52 * piece + exponent);
    e.add(negative ? -v : v);
  }
  return e;
}

// An exact value k * 2^exponent.
struct Scaled {
  __int128 k;
  int exponent;
};

// v * n exactly (v finite): v's integer mantissa, with its sign, times n, at v's exponent, which
// stays at -1074 or above.
Scaled scaled_times(double v, uint64_t n) {
  int exponent;
  const double m = std::frexp(v, &exponent);            // v = m 2^exponent, |m| in [0.5, 1)
  const int64_t mantissa = int64_t(std::ldexp(m, 53));  // exact: 53 bits
  Scaled out{__int128(mantissa) * n, exponent - 53};
  if (out.exponent < -1074) {  // subnormal v: its mantissa's low bits are zero, shift them out
    out.k >>= -1074 - out.exponent;
    out.exponent = -1074;
  }
  return out;
}

ExactSum exact_times(double v, uint64_t n) {
  if (v == 0 || n == 0) return ExactSum{};
  const Scaled t = scaled_times(v, n);
  return exact_scaled(t.k, t.exponent);
}

// The element of a constant job, after the expression (float32 stores the value rounded).
double constant_value(const JobSpec& s) {
  const double x = s.dtype == DType::kFloat32 ? double(float(s.param0)) : s.param0;
  return s.scale * x + s.offset;
}

// An arange job's element at `index`, after the expression, as the closed forms take it.
double arange_value(const JobSpec& s, uint64_t index) {
  return s.scale * (s.param0 + s.param1 * double(index)) + s.offset;
}

}  // namespace

double sum_error_bound(long double sum_abs, double element_epsilon, uint64_t chunk_elements,
                       uint64_t chunks) {
  uint64_t depth = chunk_elements + 1;
  for (uint64_t c = 1; c < chunks; c *= 2) ++depth;  // the pairwise tree over chunk partials
  // Elements as computed (each within element_epsilon of exact) summed with depth roundings; 1%
  // covers the second-order terms.
  const long double elements = sum_abs * element_epsilon;
  const long double summation = (long double)depth * kUnitRoundoff * (sum_abs + elements);
  return double((elements + summation) * 1.01L);
}

namespace {

// arange over the selected rows x cols (none empty): the sum of the selected global indices, and
// the first and last of them (where the elements are smallest and largest, or the reverse).
struct ArangeIndices {
  __int128 sum;
  uint64_t first, last;
};

ArangeIndices arange_indices(const JobSpec& s, const AxisRun& rows, const AxisRun& cols) {
  // sum over selected of index = nc * cols * sum(r) + nr * sum(c)
  const __int128 sum_r = __int128(rows.count) * rows.first +
                         __int128(s.row_sel.step) * rows.count * (rows.count - 1) / 2;
  const __int128 sum_c = __int128(cols.count) * cols.first +
                         __int128(s.col_sel.step) * cols.count * (cols.count - 1) / 2;
  return ArangeIndices{__int128(cols.count) * s.cols * sum_r + __int128(rows.count) * sum_c,
                       rows.first * s.cols + cols.first,
                       (rows.first + (rows.count - 1) * s.row_sel.step) * s.cols + cols.first +
                           (cols.count - 1) * s.col_sel.step};
}

// Integer parameters and every intermediate below 2^53 (the stored value below 2^24 for float32),
// up to the element of index `last`: every element is computed exactly.
bool arange_values_exact(const JobSpec& s, uint64_t last) {
  const double stored_limit = s.dtype == DType::kFloat32 ? 16777216.0 : kTwo53;
  return is_integer(s.scale) && is_integer(s.offset) && is_integer(s.param0) && is_integer(s.param1) &&
         std::fabs(s.param0) + std::fabs(s.param1) * double(last) < stored_limit &&
         std::fabs(s.scale) * (std::fabs(s.param0) + std::fabs(s.param1) * double(last)) + std::fabs(s.offset) <
             kTwo53;
}

// The exact sum of `count` exactly computed elements whose indices add up to sum_index. Each term
// is below count 2^53 <= 2^108: no overflow.
__int128 arange_exact_sum(const JobSpec& s, uint64_t count, __int128 sum_index) {
  return __int128(int64_t(s.scale)) * (__int128(int64_t(s.param0)) * __int128(count) +
                                       __int128(int64_t(s.param1)) * sum_index) +
         __int128(int64_t(s.offset)) * __int128(count);
}

// arange: the sum in closed form over the selected indices (a 128-bit integer when every element
// is computed exactly), min and max at the selection's ends, and the rounding bounds otherwise.
void expect_arange(const JobSpec& s, const AxisRun& rows, const AxisRun& cols, Expectation& e) {
  const ArangeIndices indices = arange_indices(s, rows, cols);
  const __int128 sum_index = indices.sum;
  const long double n = (long double)e.count;
  const long double total = (long double)s.scale * ((long double)s.param0 * n +
                                                      (long double)s.param1 * (long double)sum_index) +
                            (long double)s.offset * n;
  e.sum = double(total);
  e.mean = double(total / n);
  const uint64_t first = indices.first, last = indices.last;
  const double v_first = arange_value(s, first), v_last = arange_value(s, last);
  e.has_min_max = true;
  e.min = std::min(v_first, v_last);
  e.max = std::max(v_first, v_last);
  // |elements| summed, bounded term by term: |scale| (|start| + |step| index) + |offset|. Four
  // roundings per element (step * index, + start, * scale, + offset), float32 storage one more.
  const long double sum_abs =
      std::fabs((long double)s.scale) * (std::fabs((long double)s.param0) * n +
                                          std::fabs((long double)s.param1) * (long double)sum_index) +
      std::fabs((long double)s.offset) * n;
  const double element_epsilon =
      4 * kUnitRoundoff + (s.dtype == DType::kFloat32 ? kFloat32Roundoff : 0.0);
  e.sum_tolerance = sum_error_bound(sum_abs, element_epsilon,
                                    max_selected_per_chunk(s, rows.count, cols.count),
                                    s.chunks());
  const double largest_abs = std::fabs(s.scale) * (std::fabs(s.param0) + std::fabs(s.param1) * double(last)) +
                             std::fabs(s.offset);
  e.min_max_tolerance = 2 * element_epsilon * largest_abs;
  // Every element computed exactly: the job's exact sum is the integer closed form and its
  // rounding must match bit for bit. Otherwise the elements themselves are rounded and the closed
  // form of the ideal values only bounds the sum.
  if (arange_values_exact(s, last)) {
    e.exact = exact_scaled(arange_exact_sum(s, e.count, sum_index), 0);
    e.sum = e.exact.rounded();
    e.sum_exact = true;
  }
}

// The expectation over the selected rows x cols of `s` (normalized): the whole array, or one chunk.
Expectation expected_over(const JobSpec& s, const AxisRun& rows, const AxisRun& cols) {
  Expectation e;
  e.count = rows.count * cols.count;
  if (e.count == 0) return e;
  switch (s.generator) {
    case Generator::kArange:
      expect_arange(s, rows, cols, e);
      break;
    case Generator::kConstant: {
      const double v = constant_value(s);
      // Every element is v exactly (the same two roundings as here), so the exact sum is v * count.
      e.exact = exact_times(v, e.count);
      e.sum = e.exact.rounded();
      e.sum_exact = true;
      e.mean = v;
      e.has_min_max = true;
      e.min = e.max = v;
      break;
    }
    case Generator::kNormal:
      e.mean = s.scale * s.param0 + s.offset;
      e.mean_tolerance = 6.0 * std::fabs(s.scale) * s.param1 / std::sqrt(double(e.count)) +
                         1e-12 * std::fabs(e.mean);
      break;
    case Generator::kUniform:
      e.mean = s.scale * (s.param0 + s.param1) / 2 + s.offset;
      e.mean_tolerance = 6.0 * std::fabs(s.scale) * (s.param1 - s.param0) / std::sqrt(12.0 * double(e.count)) +
                         1e-12 * std::fabs(e.mean);
      break;
  }
  return e;
}

}  // namespace

Expectation expected_result(const JobSpec& raw) {
  const JobSpec s = normalized(raw);
  return expected_over(s, select_axis(0, s.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step),
                       select_axis(0, s.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step));
}

namespace {

// The exact partial over rows [row0, row0 + rows) x cols [col0, col0 + cols) of `s` (normalized).
std::optional<PartialSum> partial_over(const JobSpec& s, uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols) {
  const Expectation e = expected_over(
      s, select_axis(row0, row0 + rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step),
      select_axis(col0, col0 + cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step));
  if (e.count == 0) return PartialSum{};  // what a worker reports for a chunk with nothing selected
  if (!e.sum_exact || !e.has_min_max || s.dtype != DType::kFloat64) return std::nullopt;
  PartialSum p;
  p.sum = e.sum;
  p.count = e.count;
  p.min = e.min;
  p.max = e.max;
  p.exact = e.exact;
  return p;
}

}  // namespace

std::optional<PartialSum> expected_chunk_partial(const JobSpec& raw, uint64_t chunk) {
  const JobSpec s = normalized(raw);
  const ChunkBox b = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.box(chunk);
  return partial_over(s, b.row0, b.rows, b.col0, b.cols);
}

namespace {

// The terms of t (its exponent at -1074 or above): ExactTerms without the accumulator
// (ExactTerms::of_magnitude).
ExactTerms terms_of(const Scaled& t) {
  const bool negative = t.k < 0;
  const unsigned __int128 magnitude = negative ? -(unsigned __int128)t.k : (unsigned __int128)t.k;
  const int bit = t.exponent - kExactLowestBit;
  const int low = bit / kExactDigitBits, shift = bit % kExactDigitBits;
  uint32_t digits[5] = {};
  uint64_t carry = 0;
  for (int i = 0; i < 4; ++i) {
    const uint64_t shifted = (uint64_t(uint32_t(magnitude >> (32 * i))) << shift) | carry;
    digits[i] = uint32_t(shifted);
    carry = shifted >> 32;
  }
  digits[4] = uint32_t(carry);
  return ExactTerms::of_magnitude(digits, 5, low, negative);
}

}  // namespace

std::optional<PartialSum> expected_run_partial(const JobSpec& raw, uint64_t first, uint64_t count) {
  const JobSpec s = normalized(raw);
  PartialSum run;
  const bool ok = for_each_run_rectangle(s.grid(), first, count, [&](uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols) {
    const std::optional<PartialSum> p = partial_over(s, row0, rows, col0, cols);
    if (p) merge(run, *p);
    return p.has_value();
  });
  if (!ok) return std::nullopt;
  return run;
}

std::optional<CompactPartial> expected_run_compact(const JobSpec& raw, uint64_t first, uint64_t count) {
  const JobSpec s = normalized(raw);
  const bool arange = s.generator == Generator::kArange;
  const double v = constant_value(s);  // constant: every element
  // Elsewhere (float32, random generators, a non-finite constant): the general path.
  if (s.dtype != DType::kFloat64 || (!arange && s.generator != Generator::kConstant) ||
      (!arange && !std::isfinite(v))) {
    const std::optional<PartialSum> p = expected_run_partial(s, first, count);
    if (!p) return std::nullopt;
    return compact(*p);
  }
  CompactPartial run;
  __int128 sum = 0;  // arange: the exact sum, an integer
  const bool ok = for_each_run_rectangle(s.grid(), first, count, [&](uint64_t row0, uint64_t rows, uint64_t col0, uint64_t cols) {
    const AxisRun r = select_axis(row0, row0 + rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
    const AxisRun c = select_axis(col0, col0 + cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);
    const uint64_t n = r.count * c.count;
    if (n == 0) return true;
    run.count += n;
    double lo = v, hi = v;
    if (arange) {
      const ArangeIndices indices = arange_indices(s, r, c);
      if (!arange_values_exact(s, indices.last)) return false;
      sum += arange_exact_sum(s, n, indices.sum);
      const double v_first = arange_value(s, indices.first), v_last = arange_value(s, indices.last);
      lo = std::min(v_first, v_last);
      hi = std::max(v_first, v_last);
    }
    run.min = std::min(run.min, lo);
    run.max = std::max(run.max, hi);
    return true;
  });
  if (!ok) return std::nullopt;
  if (run.count == 0) return run;
  run.exact = terms_of(arange ? Scaled{sum, 0} : scaled_times(v, run.count));
  run.sum = run.exact.rounded();
  return run;
}

std::string check_result(const JobSpec& spec, const PartialSum& got,
                         const std::vector<ReferenceSum>& references) {
  const Expectation e = expected_result(spec);
  if (got.count != e.count) return fmt::format("count is {}, expected {}", got.count, e.count);
  if (e.count == 0) return "";
  if (!std::isfinite(got.sum))
    return fmt::format("sum is {} (it overflowed float64), expected {:.17g}", got.sum, e.sum);
  if (spec.generator == Generator::kArange || spec.generator == Generator::kConstant) {
    if (e.sum_exact) {
      if (std::memcmp(&got.sum, &e.sum, sizeof got.sum) != 0)
        return fmt::format("sum is {:.17g}, expected exactly {:.17g}", got.sum, e.sum);
    } else {
      // Rounding of the expected value itself (computed in long double, rounded once) on top.
      const double tol = e.sum_tolerance + kUnitRoundoff * std::fabs(e.sum);
      if (!(std::fabs(got.sum - e.sum) <= tol))
        return fmt::format("sum is {:.17g}, expected {:.17g} (within {:.3g}, the rounding bound)",
                           got.sum, e.sum, tol);
    }
    if (e.has_min_max && spec.dtype == DType::kFloat64) {
      const double tol_mm = e.sum_exact ? 0.0 : e.min_max_tolerance;
      if (std::fabs(got.min - e.min) > tol_mm || std::fabs(got.max - e.max) > tol_mm)
        return fmt::format("min/max are {:.17g}/{:.17g}, expected {:.17g}/{:.17g}", got.min, got.max,
                           e.min, e.max);
    }
    return "";
  }
  if (const std::optional<double> reference = reference_sum(spec, references)) {
    if (std::memcmp(&got.sum, &*reference, sizeof got.sum) != 0)
      return fmt::format("sum is {:.17g}, expected exactly {:.17g} (reference value)", got.sum,
                         *reference);
    return "";
  }
  const double mean = got.sum / double(got.count);
  if (!(std::fabs(mean - e.mean) <= e.mean_tolerance))
    return fmt::format("mean is {:.17g}, expected {:.17g} within {:.3g}", mean, e.mean, e.mean_tolerance);
  return "";
}

}  // namespace psched
