// Reference values: the exact sums (correctly rounded, so fixed bit patterns) of a few normal and
// uniform jobs, which have no closed form. With the exact sum a job's result is one number whatever
// its chunking, workers or backend, so pbench --check compares it bit for bit when the job is in
// the table (reference_sums.cpp; bench/reference_sums.sh computes the entries) and falls back to
// the statistical bound of closed_form.h otherwise.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/job_spec.h"

namespace psched {

struct ReferenceSum {
  std::string key;  // reference_key() of the job
  double sum;       // its exact sum, correctly rounded
};

// What a job's sum depends on, as text: everything but the chunking and `fused`, which do not
// change it. spec must be validated.
std::string reference_key(const JobSpec& spec);

// The built-in table.
const std::vector<ReferenceSum>& reference_sums();

// The table's sum for this job, if it has one.
std::optional<double> reference_sum(const JobSpec& spec,
                                    const std::vector<ReferenceSum>& table = reference_sums());

}  // namespace psched
