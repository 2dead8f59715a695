// What a job's result must be, without computing the array: closed forms for arange and constant
// (exact integers where the values allow), and statistical bounds for normal and uniform. Used by
// pbench --check and by the tests.
#pragma once

#include <optional>
#include <string>

#include "common/job_spec.h"
#include "common/partial.h"

namespace psched {

struct Expectation {
  uint64_t count = 0;
  double sum = 0;          // closed form (arange, constant)
  bool sum_exact = false;  // every value and partial sum is an integer below 2^53: bits must match
  double mean = 0;         // expected mean
  double mean_tolerance = 0;  // normal/uniform: allowed |mean - expected|
  bool has_min_max = false;
  double min = 0, max = 0;
};

// spec must be validated.
Expectation expected_result(const JobSpec& spec);

// The exact partial a worker reports for chunk `chunk` of an arange or constant float64 job whose
// values and sums are integers below 2^53 (so every summation order gives the same bits: the CPU
// and CUDA backends' included); nullopt for any other job or chunk. The simulated workers of
// bench/loadgen answer with it; tests/common/closed_form_test.cpp holds it to reduce_chunk_cpu.
std::optional<PartialSum> expected_chunk_partial(const JobSpec& spec, uint64_t chunk);

// Empty when `got` satisfies the expectation; else one line saying what differs.
std::string check_result(const JobSpec& spec, const PartialSum& got);

}  // namespace psched
