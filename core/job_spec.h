// JobSpec: one array-sum job as docs/design.md defines it (array, generator, expression, selection,
// reduction), in plain C++ so the client, the scheduler, both backends and the tests share it.
// validate() is the single place that decides what a job may ask for; the client library and the
// scheduler both call it, so a client of another make cannot hand a worker a job it would choke on.
#pragma once

#include <cstdint>
#include <string>

#include "core/chunk_grid.h"
#include "core/generators.h"
#include "core/source.h"
#include "core/status.h"

namespace psched {

// An element's type as stored. Generated arrays are float64 or float32; stored arrays any of these.
// Every one widens to float64 exactly except 64-bit integers past 2^53 (the exact sum still holds
// them: see storage/chunk_reader.h).
enum class DType : uint8_t {
  kFloat64 = 0, kFloat32 = 1,
  kInt8 = 2, kInt16 = 3, kInt32 = 4, kInt64 = 5,
  kUInt8 = 6, kUInt16 = 7, kUInt32 = 8, kUInt64 = 9,
  kBool = 10,
};
inline constexpr DType kLastDType = DType::kBool;

const char* generator_name(Generator g);
StatusOr<Generator> parse_generator(const std::string& name);
const char* dtype_name(DType d);
StatusOr<DType> parse_dtype(const std::string& name);
constexpr uint64_t element_bytes(DType d) {
  switch (d) {
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
  }
  return 8;
}
constexpr bool is_float(DType d) { return d == DType::kFloat64 || d == DType::kFloat32; }

// Stop value meaning "to the end of the axis", as Python's empty slice stop.
constexpr uint64_t kToEnd = UINT64_MAX;

struct Slice {
  uint64_t start = 0;
  uint64_t stop = kToEnd;
  uint64_t step = 1;
};

struct JobSpec {
  uint64_t rows = 500000;
  uint64_t cols = 500000;
  uint64_t chunk_rows = 10000;
  uint64_t chunk_cols = 10000;
  DType dtype = DType::kFloat64;

  // The source (core/source.h): the generator below, or `stored` when stored.stored().
  Generator generator = Generator::kNormal;
  // normal: mean, std; uniform: low, high; arange: start, step; constant: value, unused.
  double param0 = 10.0;
  double param1 = 1.0;
  uint64_t seed = 0;
  StoredArray stored;

  // Per-element expression: scale * x + offset (multiply, then add, each rounded: no fma).
  double scale = 1.0;
  double offset = 1.0;

  Slice row_sel{0, kToEnd, 2};
  Slice col_sel{0, kToEnd, 2};

  // Generate only the selected elements and reduce in one pass, storing nothing (a benchmark
  // variant; the default keeps the DeepOps benchmark's "create the array, then reduce").
  bool fused = false;

  // Workers also sum each selected element's square exactly (PartialSum::squares), for var and
  // std; off, a job costs what a sum-only job always has.
  bool squares = false;

  uint64_t elements() const { return rows * cols; }
  uint64_t element_bytes() const { return psched::element_bytes(dtype); }
  uint64_t bytes() const { return elements() * element_bytes(); }
  uint64_t chunk_elements() const { return chunk_rows * chunk_cols; }  // a whole chunk's, edge or not
  uint64_t chunk_bytes() const { return chunk_elements() * element_bytes(); }
  ChunkGrid grid() const { return ChunkGrid{rows, cols, chunk_rows, chunk_cols}; }
  uint64_t chunks() const { return grid().chunks(); }  // chunk sizes > 0: after validate()
};

// Limits a job must stay inside. Chunks are bounded so a chunk's element index fits 32-bit grid
// arithmetic on devices. A job's chunk count costs the scheduler nothing per chunk (it tracks
// ranges: scheduler/range_table.h), so the bound is only one that every count and index in the
// system holds with room to spare: 2^40 chunks (2^40 one-element chunks take a 2-core machine's
// CPU workers about a day).
constexpr uint64_t kMaxChunks = uint64_t{1} << 40;
constexpr uint64_t kMaxChunkElements = uint64_t{1} << 31;
// A stored array's path and its stack's files travel in every DefineJob: bounded so that a spec
// always fits a frame (4096 x 4 KiB paths would not; 65536 short names do).
constexpr size_t kMaxSourcePathBytes = 4096;
constexpr size_t kMaxStackFiles = 65536;

// Checks every field; the message names the field, the value and what was expected.
Status validate(const JobSpec& spec);
// A job's verify option (Submit.verifyFraction, pbench --verify): the share of chunks computed twice,
// 0 (off) to 1 (every chunk).
Status validate_verify_fraction(double fraction);

// Selection stops clamped to the array ("to the end" made concrete), and an offset of -0.0 made
// +0.0, so that no element is ever -0.0 (x * scale + 0.0 is +0.0 where the product is a zero of
// either sign): the min or max of elements that are zeros would otherwise take the sign of
// whichever zero a chunking met first, and a job's bits must not depend on its chunks. Call after
// validate().
JobSpec normalized(const JobSpec& spec);

std::string describe(const JobSpec& spec);

}  // namespace psched
