#include "client/job_spec_of.h"

namespace pclient {

psched::JobSpec job_spec_of(const Job& j) {
  psched::JobSpec s;
  s.rows = j.rows;
  s.cols = j.cols;
  s.chunk_rows = j.chunk_rows;
  s.chunk_cols = j.chunk_cols;
  auto dtype = psched::parse_dtype(j.dtype);
  if (!dtype) throw Error(dtype.message());
  s.dtype = *dtype;
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
  return p;
}

}  // namespace pclient
