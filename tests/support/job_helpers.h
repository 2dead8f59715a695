// Small job builders shared by the end-to-end tests.
#pragma once

#include "client/job_spec_of.h"
#include "core/closed_form.h"
#include "core/job_spec.h"
#include "pclient/client.h"

#include <utility>
#include <vector>

namespace psched::test {

// normal(10, 1) over 300 x 500 with a ragged selection: rows 1, 4, 7, ... and odd columns, as (x + 1).
inline pclient::Job ragged_normal_job(uint64_t chunk_rows, uint64_t chunk_cols, uint64_t seed) {
  pclient::Job j;
  j.rows = 300;
  j.cols = 500;
  j.chunk_rows = chunk_rows;
  j.chunk_cols = chunk_cols;
  j.seed = seed;
  j.row_start = 1;
  j.row_step = 3;
  j.col_start = 1;
  j.col_step = 2;
  return j;
}

// ragged_normal_job's chunkings: one chunk, square, ragged at both edges, single rows, single
// columns, tall thin.
inline const std::vector<std::pair<uint64_t, uint64_t>> kRaggedChunkings = {
    {300, 500}, {100, 100}, {37, 53}, {1, 500}, {300, 1}, {64, 7}};

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
