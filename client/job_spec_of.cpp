#include "client/job_spec_of.h"

#include <fmt/format.h>

#include <optional>

#include "core/variance.h"

namespace pclient {

psched::OpenedArray opened_array(const Input& in) {
  auto a = psched::open_array(psched::ArrayInput{in.path, in.format, in.dtype, in.shape, in.offset, in.byte_order});
  if (!a) throw Error(a.message());
  return *a;
}

Job open_array(const Input& input) {
  const psched::OpenedArray a = opened_array(input);
  Job j;
  j.input = input;
  j.rows = a.rows;
  j.cols = a.cols;
  j.chunk_rows = a.chunk_rows;
  j.chunk_cols = a.chunk_cols;
  j.dtype = psched::dtype_name(a.dtype);
  j.scale = 1.0;
  j.offset = 0.0;
  j.row_step = j.col_step = 1;
  return j;
}

psched::JobSpec job_spec_of(const Job& j) {
  psched::JobSpec s;
  std::optional<psched::DType> stored_dtype;
  if (!j.input.path.empty()) {
    // The file says what it holds (read again at each submit: it may have changed since).
    const psched::OpenedArray a = opened_array(j.input);
    if (a.rows != j.rows || a.cols != j.cols)
      throw Error(fmt::format("{} holds {} x {} elements; the job says {} x {}", j.input.path, a.rows, a.cols,
                              j.rows, j.cols));
    s.stored = a.stored;
    stored_dtype = a.dtype;
  }
  s.rows = j.rows;
  s.cols = j.cols;
  s.chunk_rows = j.chunk_rows;
  s.chunk_cols = j.chunk_cols;
  auto dtype = psched::parse_dtype(j.dtype);
  if (!dtype) throw Error(dtype.message());
  s.dtype = *dtype;
  if (stored_dtype) s.dtype = *stored_dtype;  // the file's type, whatever the job's dtype says
  auto gen = psched::parse_generator(j.generator);
  if (!gen) throw Error(gen.message());
  s.generator = *gen;
  s.param0 = j.param0;
  s.param1 = j.param1;
  s.seed = j.seed;
  s.scale = j.scale;
  s.offset = j.offset;
  s.row_sel = {j.row_start, j.row_stop, j.row_step};
  s.col_sel = {j.col_start, j.col_stop, j.col_step};
  s.fused = j.fused;
  s.squares = j.squares;
  return s;
}

psched::PartialSum partial_of(const Result& r) {
  psched::PartialSum p;
  p.sum = r.sum;
  p.count = r.count;
  p.min = r.min;
  p.max = r.max;
  p.exact.add_terms(r.exact_terms.data(), r.exact_terms.size());
  p.exact.nan = r.nan_count;
  p.exact.pos_inf = r.pos_inf_count;
  p.exact.neg_inf = r.neg_inf_count;
  p.has_squares = r.has_squares;
  p.squares.add_terms(r.squares_terms.data(), r.squares_terms.size());
  p.squares.nan = r.squares_nan_count;
  p.squares.pos_inf = r.squares_pos_inf_count;
  p.squares.neg_inf = r.squares_neg_inf_count;
  return p;
}

namespace {

// The result as a partial for var/std, which need the squares: checked before it is built.
psched::PartialSum with_squares(const Result& r) {
  if (!r.has_squares) throw Error("var/std need a job that asked for them (Job::squares)");
  return partial_of(r);
}

}  // namespace

double Result::energy_joules() const {
  double joules = 0;
  for (const DeviceReport& d : devices) joules += d.energy_joules;
  return joules;
}

double Result::var(uint32_t ddof) const {
  const psched::PartialSum p = with_squares(*this);
  return psched::exact_variance(p.exact, p.squares, p.count, ddof);
}

double Result::std(uint32_t ddof) const {
  const psched::PartialSum p = with_squares(*this);
  return psched::exact_std(p.exact, p.squares, p.count, ddof);
}

}  // namespace pclient
