#include "worker/cpu/reduce.h"

#include "common/chunk_grid.h"
#include "common/generators.h"

namespace psched {
namespace {

GeneratorParams params_of(const JobSpec& s) {
  return GeneratorParams{uint8_t(s.generator), s.param0, s.param1, s.seed};
}

// Element as stored in the array's dtype, widened back to double for the expression.
inline double stored(const JobSpec& s, double v) {
  return s.dtype == DType::kFloat32 ? double(float(v)) : v;
}

inline void accumulate(PartialSum& p, double v) {
  p.sum += v;
  p.min = v < p.min ? v : p.min;
  p.max = v > p.max ? v : p.max;
}

}  // namespace

PartialSum reduce_chunk_cpu(const JobSpec& s, uint64_t chunk, std::vector<double>& scratch) {
  const ChunkGrid grid{s.rows, s.cols, s.chunk_rows, s.chunk_cols};
  const ChunkBox box = grid.box(chunk);
  const GeneratorParams gen = params_of(s);
  const AxisRun rsel =
      select_axis(box.row0, box.row0 + box.rows, s.row_sel.start, s.row_sel.stop, s.row_sel.step);
  const AxisRun csel =
      select_axis(box.col0, box.col0 + box.cols, s.col_sel.start, s.col_sel.stop, s.col_sel.step);

  PartialSum p;
  p.count = rsel.count * csel.count;

  if (s.fused) {
    for (uint64_t i = 0; i < rsel.count; ++i) {
      const uint64_t r = rsel.first + i * s.row_sel.step;
      for (uint64_t j = 0; j < csel.count; ++j) {
        const uint64_t c = csel.first + j * s.col_sel.step;
        accumulate(p, mul_add_rounded(s.scale, stored(s, element_value(gen, r * s.cols + c)),
                                      s.offset));
      }
    }
    return p;
  }

  // Create: every element of the chunk, row-major in the chunk.
  scratch.resize(box.rows * box.cols);
  for (uint64_t r = 0; r < box.rows; ++r) {
    const uint64_t base = (box.row0 + r) * s.cols + box.col0;
    double* row = scratch.data() + r * box.cols;
    for (uint64_t c = 0; c < box.cols; ++c) row[c] = stored(s, element_value(gen, base + c));
  }
  // Reduce the selection.
  for (uint64_t i = 0; i < rsel.count; ++i) {
    const double* row = scratch.data() + (rsel.first + i * s.row_sel.step - box.row0) * box.cols;
    for (uint64_t j = 0; j < csel.count; ++j) {
      const uint64_t c = csel.first + j * s.col_sel.step - box.col0;
      accumulate(p, mul_add_rounded(s.scale, row[c], s.offset));
    }
  }
  return p;
}

}  // namespace psched
