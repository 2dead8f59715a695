#include "common/closed_form.h"

#include <fmt/format.h>

#include <cmath>

#include "common/chunk_grid.h"

namespace psched {
namespace {

bool is_integer(double v) { return std::isfinite(v) && std::floor(v) == v && std::fabs(v) < 9e15; }

constexpr double kTwo53 = 9007199254740992.0;

// The expectation over the selected rows x cols of `s` (normalized): the whole array, or one chunk.
Expectation expected_over(const JobSpec& s, const AxisRun& rows, const AxisRun& cols) {
  Expectation e;
  e.count = rows.count * cols.count;
  if (e.count == 0) return e;
  const long double nr = rows.count, nc = cols.count;
  switch (s.generator) {
    case Generator::kArange: {
      // sum over selected of index = nc * cols * sum(r) + nr * sum(c)
      const __int128 sum_r = __int128(rows.count) * rows.first +
                             __int128(s.row_sel.step) * rows.count * (rows.count - 1) / 2;
      const __int128 sum_c = __int128(cols.count) * cols.first +
                             __int128(s.col_sel.step) * cols.count * (cols.count - 1) / 2;
      const __int128 sum_index = __int128(cols.count) * s.cols * sum_r + __int128(rows.count) * sum_c;
      const long double n = (long double)e.count;
      const long double total = (long double)s.scale * ((long double)s.param0 * n +
                                                          (long double)s.param1 * (long double)sum_index) +
                                (long double)s.offset * n;
      e.sum = double(total);
      e.mean = double(total / n);
      const uint64_t first = rows.first * s.cols + cols.first;
      const uint64_t last = (rows.first + (rows.count - 1) * s.row_sel.step) * s.cols + cols.first +
                            (cols.count - 1) * s.col_sel.step;
      const double v_first = s.scale * (s.param0 + s.param1 * double(first)) + s.offset;
      const double v_last = s.scale * (s.param0 + s.param1 * double(last)) + s.offset;
      e.has_min_max = true;
      e.min = std::min(v_first, v_last);
      e.max = std::max(v_first, v_last);
      const long double largest = std::max(std::fabs((long double)v_first), std::fabs((long double)v_last));
      const double float32_limit = 16777216.0;
      const bool values_exact = is_integer(s.scale) && is_integer(s.offset) && is_integer(s.param0) &&
                                is_integer(s.param1) &&
                                std::fabs(s.param0) + std::fabs(s.param1) * double(last) <
                                    (s.dtype == DType::kFloat32 ? float32_limit : kTwo53);
      e.sum_exact = values_exact && largest * n < (long double)kTwo53;
      break;
    }
    case Generator::kConstant: {
      const double x = s.dtype == DType::kFloat32 ? double(float(s.param0)) : s.param0;
      const double v = s.scale * x + s.offset;
      e.sum = double((long double)v * (long double)e.count);
      e.mean = v;
      e.has_min_max = true;
      e.min = e.max = v;
      e.sum_exact = is_integer(v) && std::fabs(v) * double(e.count) < kTwo53 && is_integer(s.scale) &&
                    is_integer(x) && is_integer(s.offset);
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
  (void)nr;
  (void)nc;
  return e;
}

}  // namespace

Expectation expected_result(const JobSpec& raw) {
  const JobSpec s = normalized(raw);
  return expected_over(s, select_axis(0, s.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step),
                       select_axis(0, s.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step));
}

std::optional<PartialSum> expected_chunk_partial(const JobSpec& raw, uint64_t chunk) {
  const JobSpec s = normalized(raw);
  const ChunkBox b = ChunkGrid{s.rows, s.cols, s.chunk_rows, s.chunk_cols}.box(chunk);
  const Expectation e = expected_over(
      s, select_axis(b.row0, b.row0 + b.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step),
      select_axis(b.col0, b.col0 + b.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step));
  if (e.count == 0) return PartialSum{};  // what a worker reports for a chunk with nothing selected
  if (!e.sum_exact || !e.has_min_max || s.dtype != DType::kFloat64) return std::nullopt;
  return PartialSum{e.sum, e.count, e.min, e.max};
}

std::string check_result(const JobSpec& spec, const PartialSum& got) {
  const Expectation e = expected_result(spec);
  if (got.count != e.count) return fmt::format("count is {}, expected {}", got.count, e.count);
  if (e.count == 0) return "";
  if (spec.generator == Generator::kArange || spec.generator == Generator::kConstant) {
    if (e.sum_exact) {
      if (got.sum != e.sum) return fmt::format("sum is {:.17g}, expected exactly {:.17g}", got.sum, e.sum);
    } else {
      const double tol = 1e-9 * std::max(1.0, std::fabs(e.sum));
      if (std::fabs(got.sum - e.sum) > tol)
        return fmt::format("sum is {:.17g}, expected {:.17g} (within {:.3g})", got.sum, e.sum, tol);
    }
    if (e.has_min_max && spec.dtype == DType::kFloat64) {
      const double tol_mm = e.sum_exact ? 0.0 : 1e-9 * std::max(std::fabs(e.min), std::fabs(e.max));
      if (std::fabs(got.min - e.min) > tol_mm || std::fabs(got.max - e.max) > tol_mm)
        return fmt::format("min/max are {:.17g}/{:.17g}, expected {:.17g}/{:.17g}", got.min, got.max,
                           e.min, e.max);
    }
    return "";
  }
  const double mean = got.sum / double(got.count);
  if (!(std::fabs(mean - e.mean) <= e.mean_tolerance))
    return fmt::format("mean is {:.17g}, expected {:.17g} within {:.3g}", mean, e.mean, e.mean_tolerance);
  return "";
}

}  // namespace psched
