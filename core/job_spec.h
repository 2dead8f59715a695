// JobSpec: one array-sum job as docs/design.md defines it (array, generator, expression, selection,
// reduction), in plain C++ so the client, the scheduler, both backends and the tests share it.
// validate() is the single place that decides what a job may ask for; the client library and the
// scheduler both call it, so a client of another make cannot hand a worker a job it would choke on.
#pragma once

#include <cstdint>
#include <string>

#include "core/chunk_grid.h"
#include "core/generators.h"
#include "core/status.h"

namespace psched {

enum class DType : uint8_t { kFloat64 = 0, kFloat32 = 1 };

const char* generator_name(Generator g);
Result<Generator> parse_generator(const std::string& name);
const char* dtype_name(DType d);
Result<DType> parse_dtype(const std::string& name);
constexpr uint64_t element_bytes(DType d) { return d == DType::kFloat64 ? 8 : 4; }

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

  Generator generator = Generator::kNormal;
  // normal: mean, std; uniform: low, high; arange: start, step; constant: value, unused.
  double param0 = 10.0;
  double param1 = 1.0;
  uint64_t seed = 0;

  // Per-element expression: scale * x + offset (multiply, then add, each rounded: no fma).
  double scale = 1.0;
  double offset = 1.0;

  Slice row_sel{0, kToEnd, 2};
  Slice col_sel{0, kToEnd, 2};

  // Generate only the selected elements and reduce in one pass, storing nothing (a benchmark
  // variant; the default keeps the DeepOps benchmark's "create the array, then reduce").
  bool fused = false;

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

// Checks every field; the message names the field, the value and what was expected.
Status validate(const JobSpec& spec);
// A job's verify option (Submit.verifyFraction, pbench --verify): the share of chunks computed twice,
// 0 (off) to 1 (every chunk).
Status validate_verify_fraction(double fraction);

// Selection stops clamped to the array ("to the end" made concrete). Call after validate().
JobSpec normalized(const JobSpec& spec);

std::string describe(const JobSpec& spec);

}  // namespace psched
