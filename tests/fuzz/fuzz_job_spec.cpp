// libFuzzer target: job-spec validation and the geometry every job goes through. Any JobSpec the
// fuzzer makes (sizes from tiny to near 2^64, NaNs, unknown enum codes) goes through validate();
// a spec it accepts must then behave: normalized() stays inside the array, the chunk grid stays
// within kMaxChunks, every chunk's selection lies inside the chunk, per-axis and per-chunk selected
// counts add up to expected_result's count, the wire round trip is exact, and describe() and
// check_result() run. A spec it refuses gets a one-line message. ASan/UBSan catch overflows.
#include <capnp/message.h>
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/chunk_grid.h"
#include "core/closed_form.h"
#include "core/job_spec.h"
#include "net/wire_convert.h"

namespace {

using psched::AxisRun;
using psched::ChunkGrid;
using psched::JobSpec;

[[noreturn]] void fail(const char* what, const JobSpec& s) {
  std::fprintf(stderr, "fuzz_job_spec: %s\n  spec: %s\n  rows %llu cols %llu chunk %llu x %llu\n", what,
               psched::describe(s).c_str(), (unsigned long long)s.rows, (unsigned long long)s.cols,
               (unsigned long long)s.chunk_rows, (unsigned long long)s.chunk_cols);
  std::abort();
}

// Sizes the fuzzer reaches easily: mostly small, sometimes anything, sometimes near a power of two.
uint64_t size_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.ConsumeIntegralInRange<uint64_t>(0, 64);
    case 1: return in.ConsumeIntegralInRange<uint64_t>(0, 100000);
    case 2: {
      const uint64_t p = uint64_t{1} << in.ConsumeIntegralInRange<int>(0, 63);
      return p + uint64_t(in.ConsumeIntegralInRange<int>(-3, 3));
    }
    default: return in.ConsumeIntegral<uint64_t>();
  }
}

double param_value(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return double(in.ConsumeIntegralInRange<int>(-10, 10));
    case 1: return in.ConsumeFloatingPoint<double>();
    default: {
      double d;
      const uint64_t bits = in.ConsumeIntegral<uint64_t>();  // NaNs, infinities, subnormals
      std::memcpy(&d, &bits, sizeof(d));
      return d;
    }
  }
}

psched::Slice slice_value(FuzzedDataProvider& in) {
  psched::Slice s;
  s.start = size_value(in);
  s.stop = in.ConsumeBool() ? psched::kToEnd : size_value(in);
  s.step = size_value(in);
  return s;
}

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// The selection along one axis of length n cut into pieces of `chunk`: each piece's run lies in the
// piece, steps from the selection start, and the runs add up to the whole axis's run.
void check_axis(const JobSpec& s, uint64_t n, uint64_t chunk, const psched::Slice& sel) {
  const AxisRun whole = psched::select_axis(0, n, sel.start, sel.stop, sel.step);
  if (whole.count > 0 && (whole.first != sel.start || whole.first >= n)) fail("axis run starts off its start", s);
  const uint64_t pieces = (n + chunk - 1) / chunk;
  if (pieces > (uint64_t{1} << 16)) return;  // bounded work per input
  uint64_t total = 0;
  for (uint64_t p = 0; p < pieces; ++p) {
    const uint64_t lo = p * chunk, hi = lo + chunk < n ? lo + chunk : n;
    const AxisRun run = psched::select_axis(lo, hi, sel.start, sel.stop, sel.step);
    if (run.count == 0) continue;
    if (run.first < lo || run.first >= hi) fail("chunk run starts outside its chunk", s);
    if ((run.first - sel.start) % sel.step != 0) fail("chunk run is off the selection's stride", s);
    if ((hi - 1 - run.first) / sel.step + 1 < run.count) fail("chunk run ends outside its chunk", s);
    total += run.count;
  }
  if (total != whole.count) fail("chunk runs do not add up to the axis run", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  JobSpec s;
  s.rows = size_value(in);
  s.cols = size_value(in);
  s.chunk_rows = size_value(in);
  s.chunk_cols = size_value(in);
  // Mostly known enum codes, sometimes any byte.
  const bool any_dtype = in.ConsumeIntegralInRange<int>(0, 3) == 3;
  s.dtype = static_cast<psched::DType>(any_dtype ? in.ConsumeIntegral<uint8_t>()
                                                 : in.ConsumeIntegralInRange<uint8_t>(0, 1));
  const bool any_generator = in.ConsumeIntegralInRange<int>(0, 4) == 4;
  s.generator = static_cast<psched::Generator>(any_generator ? in.ConsumeIntegral<uint8_t>()
                                                             : in.ConsumeIntegralInRange<uint8_t>(0, 3));
  s.param0 = param_value(in);
  s.param1 = param_value(in);
  s.seed = in.ConsumeIntegral<uint64_t>();
  s.scale = param_value(in);
  s.offset = param_value(in);
  s.row_sel = slice_value(in);
  s.col_sel = slice_value(in);
  s.fused = in.ConsumeBool();

  const psched::Status st = psched::validate(s);
  if (!st) {
    if (st.message().empty() || st.message().find('\n') != std::string::npos) fail("bad refusal message", s);
    return 0;
  }
  (void)psched::describe(s);

  // The wire round trip is exact.
  capnp::MallocMessageBuilder m;
  auto w = m.initRoot<psched::wire::JobSpec>();
  psched::to_wire(s, w);
  const JobSpec back = psched::from_wire(w.asReader());
  if (back.rows != s.rows || back.cols != s.cols || back.chunk_rows != s.chunk_rows ||
      back.chunk_cols != s.chunk_cols || back.dtype != s.dtype || back.generator != s.generator ||
      !same(back.param0, s.param0) || !same(back.param1, s.param1) || back.seed != s.seed ||
      !same(back.scale, s.scale) || !same(back.offset, s.offset) || back.row_sel.start != s.row_sel.start ||
      back.row_sel.stop != s.row_sel.stop || back.row_sel.step != s.row_sel.step ||
      back.col_sel.start != s.col_sel.start || back.col_sel.stop != s.col_sel.stop ||
      back.col_sel.step != s.col_sel.step || back.fused != s.fused)
    fail("wire round trip differs", s);

  const JobSpec n = psched::normalized(s);
  if (!psched::validate(n)) fail("normalized spec no longer validates", s);
  if (n.chunk_rows == 0 || n.chunk_rows > n.rows || n.chunk_cols == 0 || n.chunk_cols > n.cols)
    fail("normalized chunk outside the array", s);
  if (n.row_sel.stop > n.rows || n.col_sel.stop > n.cols) fail("normalized stop past the array", s);
  const ChunkGrid grid{n.rows, n.cols, n.chunk_rows, n.chunk_cols};
  const uint64_t chunks = grid.chunks();
  if (chunks == 0 || chunks > psched::kMaxChunks) fail("chunk count out of range", s);
  if (n.chunk_rows * n.chunk_cols > psched::kMaxChunkElements) fail("chunk too large", s);

  const psched::Expectation e = psched::expected_result(s);
  const AxisRun rows = psched::select_axis(0, n.rows, n.row_sel.start, n.row_sel.stop, n.row_sel.step);
  const AxisRun cols = psched::select_axis(0, n.cols, n.col_sel.start, n.col_sel.stop, n.col_sel.step);
  if (e.count != rows.count * cols.count) fail("expected count is not rows x cols selected", s);
  check_axis(s, n.rows, n.chunk_rows, n.row_sel);
  check_axis(s, n.cols, n.chunk_cols, n.col_sel);

  // Whole chunks, for small grids: boxes tile the array and selections add up.
  if (chunks <= 4096) {
    uint64_t selected = 0, elements = 0;
    for (uint64_t k = 0; k < chunks; ++k) {
      const psched::ChunkBox b = grid.box(k);
      if (b.rows == 0 || b.cols == 0 || b.row0 + b.rows > n.rows || b.col0 + b.cols > n.cols)
        fail("chunk box outside the array", s);
      elements += b.rows * b.cols;
      const AxisRun r =
          psched::select_axis(b.row0, b.row0 + b.rows, n.row_sel.start, n.row_sel.stop, n.row_sel.step);
      const AxisRun c =
          psched::select_axis(b.col0, b.col0 + b.cols, n.col_sel.start, n.col_sel.stop, n.col_sel.step);
      selected += r.count * c.count;
    }
    if (elements != n.rows * n.cols) fail("chunk boxes do not tile the array", s);
    if (selected != e.count) fail("per-chunk counts do not add up to the job's count", s);
  }
  // check_result takes any partial a worker could send.
  psched::PartialSum got;
  got.sum = param_value(in);
  got.count = in.ConsumeIntegral<uint64_t>();
  got.min = param_value(in);
  got.max = param_value(in);
  got.exact.add(got.sum);
  if (in.ConsumeBool()) {
    got.sum = e.sum;
    got.count = e.count;
    got.min = e.min;
    got.max = e.max;
    got.exact = e.exact;
  }
  const std::string problem = psched::check_result(s, got);
  if (problem.find('\n') != std::string::npos) fail("check_result message has a newline", s);
  return 0;
}
