#include "core/job_spec.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "core/chunk_grid.h"

namespace psched {

const char* generator_name(Generator g) {
  switch (g) {
    case Generator::kNormal: return "normal";
    case Generator::kUniform: return "uniform";
    case Generator::kArange: return "arange";
    case Generator::kConstant: return "constant";
  }
  return "?";
}

StatusOr<Generator> parse_generator(const std::string& name) {
  for (Generator g : {Generator::kNormal, Generator::kUniform, Generator::kArange,
                      Generator::kConstant}) {
    if (name == generator_name(g)) return g;
  }
  return Status::invalid(fmt::format(
      "unknown generator '{}' (expected normal, uniform, arange or constant)", name));
}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::kFloat64: return "float64";
    case DType::kFloat32: return "float32";
    case DType::kInt8: return "int8";
    case DType::kInt16: return "int16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kUInt16: return "uint16";
    case DType::kUInt32: return "uint32";
    case DType::kUInt64: return "uint64";
    case DType::kBool: return "bool";
  }
  return "?";
}

StatusOr<DType> parse_dtype(const std::string& name) {
  for (uint8_t d = 0; d <= uint8_t(kLastDType); ++d)
    if (name == dtype_name(DType(d))) return DType(d);
  return Status::invalid(fmt::format(
      "unknown dtype '{}' (expected float64, float32, int8, int16, int32, int64, uint8, uint16, uint32, "
      "uint64 or bool)",
      name));
}

const char* source_kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::kGenerator: return "generator";
    case SourceKind::kNpy: return "npy";
    case SourceKind::kRaw: return "raw";
    case SourceKind::kNpyStack: return "npy-stack";
    case SourceKind::kZarr: return "zarr";
  }
  return "?";
}

const char* compressor_name(Compressor c) {
  switch (c) {
    case Compressor::kNone: return "none";
    case Compressor::kZstd: return "zstd";
    case Compressor::kBlosc: return "blosc";
  }
  return "?";
}

namespace {

// A value above INT64_MAX in a selection is most likely a negative index wrapped to unsigned by the
// caller (pclient::Job's fields are unsigned): say so rather than only "too large".
std::string wrapped_hint(uint64_t v) {
  return v > uint64_t(INT64_MAX) && v != kToEnd
             ? fmt::format(" = {} wrapped to unsigned? negative indices are not counted from the end "
                           "here: give start and stop from 0",
                           int64_t(v))
             : std::string();
}

Status check_slice(const char* axis, const Slice& s, uint64_t length) {
  if (s.step == 0)
    return Status::invalid(fmt::format("{}-step must be > 0 (got 0)", axis));
  if (s.start > length)
    return Status::invalid(fmt::format("{}-start must be from 0 to {} (got {}{})", axis, length,
                                       s.start, wrapped_hint(s.start)));
  if (s.stop != kToEnd && s.stop > length)
    return Status::invalid(fmt::format("{}-stop must be from 0 to {} or 'to the end' (got {}{})",
                                       axis, length, s.stop, wrapped_hint(s.stop)));
  if (s.stop != kToEnd && s.stop < s.start)
    return Status::invalid(
        fmt::format("{}-stop must be >= {}-start {} (got {})", axis, axis, s.start, s.stop));
  return Status::ok();
}

bool finite(double v) { return std::isfinite(v); }

// Elements and the sum must stay finite: a job whose values can pass float64's (or float32's)
// largest value would come back as inf or NaN (JSON null), so it is refused up front. Bounds are
// over the selected elements, in long double: |x| (normal: the ziggurat's farthest tail element,
// r - log(2^-53) / r, is 13.71 std from the mean), then |scale| |x| + |offset|, then count times
// that.
Status check_magnitudes(const JobSpec& s) {
  const uint64_t row_stop = s.row_sel.stop == kToEnd ? s.rows : s.row_sel.stop;
  const uint64_t col_stop = s.col_sel.stop == kToEnd ? s.cols : s.col_sel.stop;
  const AxisRun rows = select_axis(0, s.rows, s.row_sel.start, row_stop, s.row_sel.step);
  const AxisRun cols = select_axis(0, s.cols, s.col_sel.start, col_stop, s.col_sel.step);
  if (rows.count == 0 || cols.count == 0) return Status::ok();
  using ld = long double;
  const ld p0 = std::fabs(ld(s.param0)), p1 = std::fabs(ld(s.param1));
  ld x = 0;
  if (s.stored.stored()) {
    // Stored floats are what they are: a sum that overflows is +-inf, as numpy's would be. Stored
    // integers are bounded by their type, so only the expression can overflow.
    if (is_float(s.dtype)) return Status::ok();
    x = std::ldexp(1.0L, int(8 * element_bytes(s.dtype)));
  } else switch (s.generator) {
    case Generator::kNormal: x = p0 + 13.71L * p1; break;
    case Generator::kUniform: x = p0 + std::fabs(ld(s.param1) - ld(s.param0)); break;
    case Generator::kArange: {
      const ld last = (ld(rows.first) + ld(rows.count - 1) * ld(s.row_sel.step)) * ld(s.cols) +
                      ld(cols.first) + ld(cols.count - 1) * ld(s.col_sel.step);
      x = p0 + p1 * last;
      break;
    }
    case Generator::kConstant: x = p0; break;
  }
  const char* why = "scale, offset or the generator's parameters are too large";
  // Bounds in full (the shortest text that reads back the same double), so that a refusal never
  // reads as "3.4e+38 past 3.4e+38".
  auto shown = [](ld v) {
    return v > ld(std::numeric_limits<double>::max())
               ? fmt::format("more than {}", std::numeric_limits<double>::max())
               : fmt::format("{}", double(v));
  };
  // A float32 array stores each element rounded to the nearest float: finite below 2^128 - 2^103
  // (half an ulp past FLT_MAX), so every finite float32 value, FLT_MAX itself included, is fine.
  const ld float32_overflow = std::ldexp(1.0L, 128) - std::ldexp(1.0L, 103);
  if (s.dtype == DType::kFloat32 && x >= float32_overflow)
    return Status::invalid(fmt::format("generated values can reach {}, which float32 stores as "
                                       "infinity (from {} up; its largest value is {}) ({})",
                                       shown(x), double(float32_overflow),
                                       double(std::numeric_limits<float>::max()), why));
  const ld element = std::fabs(ld(s.scale)) * x + std::fabs(ld(s.offset));
  const ld sum = element * ld(rows.count) * ld(cols.count);
  const ld largest = ld(std::numeric_limits<double>::max());
  if (x > largest || element > largest || sum > largest)
    return Status::invalid(fmt::format(
        "elements can reach {} and the sum of the {} selected ones {}, past float64's largest "
        "value {} ({})",
        shown(element), rows.count * cols.count, shown(sum), double(largest), why));
  return Status::ok();
}

// What a stored source must say for a worker to read it (storage/open.h fills it from the file).
Status check_stored(const JobSpec& s) {
  const StoredArray& a = s.stored;
  if (uint8_t(a.kind) > uint8_t(SourceKind::kZarr))
    return Status::invalid(fmt::format("source kind code {} is unknown", int(a.kind)));
  if (a.path.empty()) return Status::invalid("a stored array needs a path (got '')");
  if (a.path.size() > kMaxSourcePathBytes || a.path.find('\0') != std::string::npos)
    return Status::invalid(fmt::format("array path must be at most {} bytes with no NUL", kMaxSourcePathBytes));
  if (s.fused) return Status::invalid("--fused generates its elements; a stored array has none to generate");
  if (a.kind == SourceKind::kNpyStack) {
    if (a.files.empty() || a.files.size() > kMaxStackFiles)
      return Status::invalid(fmt::format("an npy stack has 1 to {} files (got {})", kMaxStackFiles, a.files.size()));
    uint64_t rows = 0;
    for (const StackFile& f : a.files) {
      if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "..")
        return Status::invalid(fmt::format("npy stack file name '{}' must be a plain name in the directory", f.name));
      if (f.rows > s.rows - rows)
        return Status::invalid(fmt::format("npy stack files hold more than the array's {} rows", s.rows));
      rows += f.rows;
    }
    if (rows != s.rows)
      return Status::invalid(fmt::format("npy stack files hold {} rows, the array {}", rows, s.rows));
  }
  if (a.kind == SourceKind::kZarr) {
    if (uint8_t(a.compressor) > uint8_t(Compressor::kBlosc))
      return Status::invalid(fmt::format("compressor code {} is unknown", int(a.compressor)));
    if (a.store_chunk_rows == 0 || a.store_chunk_cols == 0 ||
        a.store_chunk_rows > kMaxChunkElements / a.store_chunk_cols)
      return Status::invalid(fmt::format("zarr chunks of {} x {} elements are empty or too large (at most {})",
                                         a.store_chunk_rows, a.store_chunk_cols, kMaxChunkElements));
    if (a.dimension_separator != '.' && a.dimension_separator != '/')
      return Status::invalid("zarr dimension_separator must be '.' or '/'");
    if (a.one_dimensional && s.rows != 1) return Status::invalid("a 1-D zarr array has one row");
    // Each stored chunk is read and decompressed once: the job's chunks are whole multiples of the
    // store's (edge chunks aside).
    const bool rows_ok = s.chunk_rows % a.store_chunk_rows == 0 || s.chunk_rows >= s.rows;
    const bool cols_ok = s.chunk_cols % a.store_chunk_cols == 0 || s.chunk_cols >= s.cols;
    if (!rows_ok || !cols_ok)
      return Status::invalid(fmt::format(
          "chunks of {} x {} must be whole multiples of the zarr store's chunks {} x {} (each stored "
          "chunk is read once)",
          s.chunk_rows, s.chunk_cols, a.store_chunk_rows, a.store_chunk_cols));
  }
  if ((a.kind == SourceKind::kNpy || a.kind == SourceKind::kRaw) &&
      a.data_offset > UINT64_MAX - s.rows * s.cols * element_bytes(s.dtype))
    return Status::invalid(fmt::format("data offset {} puts the array past 2^64 bytes", a.data_offset));
  if (!finite(s.scale)) return Status::invalid(fmt::format("scale must be finite (got {})", s.scale));
  return Status::ok();
}

}  // namespace

Status validate_verify_fraction(double fraction) {
  if (!(fraction >= 0 && fraction <= 1))  // NaN fails too
    return Status::invalid(fmt::format("verify fraction must be in [0, 1] (got {})", fraction));
  return Status::ok();
}

Status validate(const JobSpec& s) {
  if (s.rows == 0) return Status::invalid("rows (-x) must be > 0 (got 0)");
  if (s.cols == 0) return Status::invalid("cols (-y) must be > 0 (got 0)");
  if (s.chunk_rows == 0) return Status::invalid("chunk-x must be > 0 (got 0)");
  if (s.chunk_cols == 0) return Status::invalid("chunk-y must be > 0 (got 0)");
  if (s.rows > UINT64_MAX / s.cols)
    return Status::invalid(fmt::format("rows x cols overflows 64 bits ({} x {})", s.rows, s.cols));
  if (s.rows * s.cols > (UINT64_MAX >> 4))
    return Status::invalid(fmt::format("array of {} x {} elements is too large (at most {} elements)",
                                       s.rows, s.cols, UINT64_MAX >> 4));
  if (uint8_t(s.dtype) > uint8_t(kLastDType))
    return Status::invalid(fmt::format("dtype code {} is unknown", int(s.dtype)));
  if (!s.stored.stored() && !is_float(s.dtype))
    return Status::invalid(fmt::format("a generated array is float64 or float32 (got {})", dtype_name(s.dtype)));
  const uint64_t chunk_rows = s.chunk_rows < s.rows ? s.chunk_rows : s.rows;
  const uint64_t chunk_cols = s.chunk_cols < s.cols ? s.chunk_cols : s.cols;
  if (chunk_rows > kMaxChunkElements / chunk_cols)
    return Status::invalid(fmt::format("a chunk of {} x {} elements is too large (at most {})",
                                       chunk_rows, chunk_cols, kMaxChunkElements));
  // From the clamped sizes: rows + chunk_rows - 1 wraps for chunk sizes near 2^64 (a zero grid
  // would then divide by zero below).
  const uint64_t grid_rows = (s.rows + chunk_rows - 1) / chunk_rows;
  const uint64_t grid_cols = (s.cols + chunk_cols - 1) / chunk_cols;
  if (grid_rows > kMaxChunks / grid_cols)
    return Status::invalid(fmt::format("{} x {} chunks is too many (at most {})", grid_rows,
                                       grid_cols, kMaxChunks));
  if (s.stored.stored()) {
    if (Status st = check_stored(s); !st) return st;
  } else switch (s.generator) {
    case Generator::kNormal:
      if (!finite(s.param0)) return Status::invalid(fmt::format("normal mean must be finite (got {})", s.param0));
      if (!finite(s.param1) || s.param1 < 0)
        return Status::invalid(fmt::format("normal std must be finite and >= 0 (got {})", s.param1));
      break;
    case Generator::kUniform:
      if (!finite(s.param0) || !finite(s.param1))
        return Status::invalid(
            fmt::format("uniform low and high must be finite (got {} and {})", s.param0, s.param1));
      if (s.param1 < s.param0)
        return Status::invalid(
            fmt::format("uniform high must be >= low {} (got {})", s.param0, s.param1));
      break;
    case Generator::kArange:
      if (!finite(s.param0) || !finite(s.param1))
        return Status::invalid(
            fmt::format("arange start and step must be finite (got {} and {})", s.param0, s.param1));
      break;
    case Generator::kConstant:
      if (!finite(s.param0))
        return Status::invalid(fmt::format("constant value must be finite (got {})", s.param0));
      break;
    default:
      return Status::invalid(fmt::format("generator code {} is unknown", int(s.generator)));
  }
  if (!finite(s.scale)) return Status::invalid(fmt::format("scale must be finite (got {})", s.scale));
  if (!finite(s.offset)) return Status::invalid(fmt::format("offset must be finite (got {})", s.offset));
  if (Status st = check_slice("row", s.row_sel, s.rows); !st) return st;
  if (Status st = check_slice("col", s.col_sel, s.cols); !st) return st;
  if (Status st = check_magnitudes(s); !st) return st;
  return Status::ok();
}

JobSpec normalized(const JobSpec& spec) {
  JobSpec s = spec;
  if (s.row_sel.stop == kToEnd || s.row_sel.stop > s.rows) s.row_sel.stop = s.rows;
  if (s.col_sel.stop == kToEnd || s.col_sel.stop > s.cols) s.col_sel.stop = s.cols;
  if (s.chunk_rows > s.rows) s.chunk_rows = s.rows;
  if (s.chunk_cols > s.cols) s.chunk_cols = s.cols;
  if (s.offset == 0.0) s.offset = 0.0;  // -0.0 too (the header says why)
  return s;
}

std::string describe(const JobSpec& s) {
  std::string gen;
  if (s.stored.stored()) gen = fmt::format("{} '{}'", source_kind_name(s.stored.kind), s.stored.path);
  else switch (s.generator) {
    case Generator::kNormal: gen = fmt::format("normal({}, {}, seed={})", s.param0, s.param1, s.seed); break;
    case Generator::kUniform: gen = fmt::format("uniform({}, {}, seed={})", s.param0, s.param1, s.seed); break;
    case Generator::kArange: gen = fmt::format("arange({}, {})", s.param0, s.param1); break;
    case Generator::kConstant: gen = fmt::format("constant({})", s.param0); break;
  }
  auto stop = [](uint64_t v) { return v == kToEnd ? std::string() : std::to_string(v); };
  return fmt::format("{} {}x{} {} chunks {}x{}, ({}*x+{})[{}:{}:{}, {}:{}:{}]{}", gen, s.rows,
                     s.cols, dtype_name(s.dtype), s.chunk_rows, s.chunk_cols, s.scale, s.offset,
                     s.row_sel.start, stop(s.row_sel.stop), s.row_sel.step, s.col_sel.start,
                     stop(s.col_sel.stop), s.col_sel.step, s.fused ? " fused" : "");
}

}  // namespace psched
