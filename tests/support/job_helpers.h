// Small job builders shared by the end-to-end tests.
#pragma once

#include "client/job_spec_of.h"
#include "core/closed_form.h"
#include "core/job_spec.h"
#include "pclient/client.h"

namespace psched::test {

inline pclient::Job arange_job(uint64_t rows, uint64_t cols, uint64_t chunk_rows, uint64_t chunk_cols,
                               uint64_t row_step = 1, uint64_t col_step = 1) {
  pclient::Job j;
  j.rows = rows;
  j.cols = cols;
  j.chunk_rows = chunk_rows;
  j.chunk_cols = chunk_cols;
  j.generator = "arange";
  j.param0 = 0;
  j.param1 = 1;
  j.offset = 1;
  j.row_step = row_step;
  j.col_step = col_step;
  return j;
}

// "" when the result is the closed form (exactly where the values allow).
inline std::string check(const pclient::Job& j, const pclient::Result& r) {
  return check_result(pclient::job_spec_of(j), pclient::partial_of(r));
}

}  // namespace psched::test
