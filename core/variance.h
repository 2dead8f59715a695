// Variance and standard deviation of a job's selected elements, from the exact sums of the
// elements and of their squares (PartialSum::exact and ::squares): computed exactly in integers and
// rounded once, so var is the correctly rounded variance and std the correctly rounded square root
// of the exact variance, whatever the chunking, order, worker count or backend. ddof as numpy's.
#pragma once

#include <cstdint>

#include "core/exact_sum.h"

namespace psched {

// var = (n S2 - S1^2) / (n (n - ddof)), S1 = sum, S2 = sum of squares (both exact). As numpy:
// NaN when n <= ddof or any element is NaN or infinite (numpy's x - mean is then NaN). +inf when
// the elements are finite but some square overflowed (|x| >= 2^512; numpy, which squares x - mean,
// may stay finite there), or the squares' sum reached 2^1024 (sent as +inf: ExactTerms). A square below 2^-969 is not exactly two doubles (its low part
// underflows), so elements under 2^-485 in magnitude are summed with that rounding.
double exact_variance(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof);
// The correctly rounded square root of the exact variance (not sqrt of the rounded var).
double exact_std(const ExactSum& sum, const ExactSum& squares, uint64_t n, uint32_t ddof);

// m 2^e plus something in (0, 2^e) when `sticky`, rounded to nearest double (ties to even),
// subnormal and overflowing results included. m needs at least 55 significant bits when sticky.
double round_scaled(uint64_t m, int e, bool sticky);

}  // namespace psched
