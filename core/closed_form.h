// What a job's result must be, without computing the array: closed forms for arange and constant
// (exact integers where the values allow), and statistical bounds for normal and uniform. Used by
// pbench --check and by the tests.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/exact_sum.h"
#include "core/job_spec.h"
#include "core/partial.h"
#include "core/reference_sums.h"

namespace psched {

struct Expectation {
  uint64_t count = 0;
  double sum = 0;          // closed form (arange, constant)
  // Every element is computed exactly (constant always; arange with integer values below 2^53):
  // `exact` is the exact sum of the selection and `sum` its correct rounding, which the job's sum
  // must match bit for bit.
  bool sum_exact = false;
  ExactSum exact;
  double mean = 0;         // expected mean
  double mean_tolerance = 0;  // normal/uniform: allowed |mean - expected|
  bool has_min_max = false;
  double min = 0, max = 0;
  // arange/constant when not exact: the most a correct result can differ from `sum` (element
  // rounding plus summation error, from the sum of |elements|; see sum_error_bound) and from
  // min/max (one element's rounding).
  double sum_tolerance = 0, min_max_tolerance = 0;
};

// Worst-case rounding error of a float64 sum of elements whose absolute values add up to at most
// `sum_abs`, each computed with `element_roundings` roundings of relative size `element_epsilon`
// (float64: 2^-53; float32 storage adds 2^-24), summed in any order within a chunk of at most
// `chunk_elements` selected elements and then by a pairwise tree over `chunks` partials. Any
// summation order of m terms errs by at most (m - 1) u sum|x| (Higham, "Accuracy and Stability of
// Numerical Algorithms", 4.2), so this holds for every backend whatever its order.
double sum_error_bound(long double sum_abs, double element_epsilon, uint64_t chunk_elements,
                       uint64_t chunks);

// spec must be validated.
Expectation expected_result(const JobSpec& spec);

// The exact partial a worker reports for chunk `chunk` of an arange or constant float64 job whose
// elements are computed exactly (Expectation::sum_exact), in O(1): nullopt for any other job. The simulated workers of
// bench/loadgen answer with it; tests/worker/chunk_partial_test.cpp holds it to reduce_chunk_cpu.
std::optional<PartialSum> expected_chunk_partial(const JobSpec& spec, uint64_t chunk);

// The same for the run of `count` chunks from `first` (row-major over the chunk grid), merged as a
// worker merges the partials of consecutive chunks: the same value, count, min and max, in O(1)
// (a run is at most three rectangles of the array). nullopt where expected_chunk_partial is.
std::optional<PartialSum> expected_run_partial(const JobSpec& spec, uint64_t first, uint64_t count);
// The same as a worker reports it, compact(expected_run_partial(...)), without an exact accumulator
// where it can: for arange and constant float64 jobs the exact total is an integer times a power
// of two, split into its terms once (psched-loadgen's simulated workers answer every run with it).
std::optional<CompactPartial> expected_run_compact(const JobSpec& spec, uint64_t first, uint64_t count);

// Empty when `got` satisfies the expectation; else one line saying what differs. arange/constant
// with exactly computed elements and jobs in `references` (reference_sums.h) must match bit for bit;
// the rest within the rounding bound (arange) or the statistical one (normal, uniform).
std::string check_result(const JobSpec& spec, const PartialSum& got,
                         const std::vector<ReferenceSum>& references = reference_sums());

}  // namespace psched
