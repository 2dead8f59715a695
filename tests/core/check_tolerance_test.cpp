// pbench --check's tolerance follows the rounding error analysis of the sum: a correct result, in
// whatever order it was summed, always passes; a wrong one still fails. Jobs whose values or sum
// would pass float64's range are refused up front, and an overflowed sum never checks "ok".
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "core/closed_form.h"
#include "core/generators.h"
#include "core/job_spec.h"

using namespace psched;

namespace {

// The job: arange(-799999.95, 0.1) over 4000 x 4000, everything selected, no offset: the
// exact sum is about 0.00145, the elements reach 8e5 and nearly cancel.
JobSpec near_zero_arange() {
  JobSpec s;
  s.rows = s.cols = 4000;
  s.generator = Generator::kArange;
  s.param0 = -799999.95;
  s.param1 = 0.1;
  s.offset = 0;
  s.row_sel = s.col_sel = {0, kToEnd, 1};
  return s;
}

double element(const JobSpec& s, uint64_t i) {
  return s.scale * mul_add_rounded(s.param1, double(i), s.param0) + s.offset;
}

// Pairwise over elements [begin, end): another order a correct backend may use.
double pairwise(const JobSpec& s, uint64_t begin, uint64_t end) {
  if (end - begin <= 2) return end - begin == 1 ? element(s, begin) : element(s, begin) + element(s, begin + 1);
  const uint64_t mid = begin + (end - begin) / 2;
  return pairwise(s, begin, mid) + pairwise(s, mid, end);
}

}  // namespace

TEST_CASE("a near-zero arange sum passes --check summed in order, in 8 lanes, and pairwise",
          "[check]") {
  const JobSpec s = near_zero_arange();
  REQUIRE(validate(s));
  const uint64_t n = s.rows * s.cols;
  double in_order = 0, lanes[8] = {};
  for (uint64_t i = 0; i < n; ++i) {
    const double v = element(s, i);
    in_order += v;
    lanes[i % 8] += v;
  }
  const double in_lanes = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                          ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  const double min = element(s, 0), max = element(s, n - 1);
  for (double sum : {in_order, in_lanes, pairwise(s, 0, n), 0.0 /* what the run returned */}) {
    INFO("sum " << sum);
    CHECK(check_result(s, PartialSum{sum, n, min, max}) == "");
  }
  // Wrong results still fail: one element short, and every index off by one.
  CHECK(check_result(s, PartialSum{in_order - max, n, min, max}) != "");
  CHECK(check_result(s, PartialSum{in_order + double(n) * s.param1, n, min, max}) != "");
}

TEST_CASE("the rounding bound is zero for nothing and grows with depth and magnitude", "[check]") {
  CHECK(sum_error_bound(0, 0, 1000, 10) == 0);
  CHECK(sum_error_bound(1e6, 0, 1000, 1) < sum_error_bound(1e6, 0, 2000, 1));
  CHECK(sum_error_bound(1e6, 0, 1000, 1) < sum_error_bound(2e6, 0, 1000, 1));
  // 1000 elements in one chunk: 1001 roundings (1000 in the chunk, one more) of 2^-53 on a sum of |x| of 1e6.
  CHECK(sum_error_bound(1e6, 0, 1000, 1) == Approx(1001 * 1e6 / 9007199254740992.0 * 1.01));
}

TEST_CASE("exact arange and constant sums must match to the bit", "[check]") {
  JobSpec s;
  s.rows = s.cols = 100;
  s.chunk_rows = s.chunk_cols = 10;
  s.generator = Generator::kArange;
  s.param0 = 0;
  s.param1 = 1;
  const Expectation e = expected_result(s);
  REQUIRE(e.sum_exact);
  CHECK(check_result(s, PartialSum{e.sum, e.count, e.min, e.max}) == "");
  CHECK(check_result(s, PartialSum{e.sum + 1, e.count, e.min, e.max}) != "");
  s.generator = Generator::kConstant;
  s.param0 = 0.1;
  s.offset = 0;
  s.row_sel = s.col_sel = {0, kToEnd, 1};
  // 0.1 is not 1/10, but every element is that same double: the exact sum is 10000 of it, which
  // rounds to 1000 (a float64 loop gives 1000.0000000001588).
  const Expectation c = expected_result(s);
  REQUIRE(c.sum_exact);
  CHECK(c.sum == 1000.0);
  CHECK(check_result(s, PartialSum{c.sum, c.count, c.min, c.max}) == "");
  CHECK(check_result(s, PartialSum{std::nextafter(c.sum, 0.0), c.count, c.min, c.max}) != "");
}

TEST_CASE("jobs whose elements or sum pass float64's range are refused, naming the bound", "[check]") {
  auto refused = [](const JobSpec& s, const char* says) {
    const Status st = validate(s);
    INFO(st.message());
    CHECK_FALSE(st);
    CHECK(st.message().find(says) != std::string::npos);
  };
  JobSpec s;
  s.rows = s.cols = 400;
  s.chunk_rows = s.chunk_cols = 100;
  s.scale = 1e308;  // the case: normal(10, 1) * 1e308
  refused(s, "past float64's largest value");
  s = {};
  s.param1 = 1e307;  // std
  refused(s, "past float64's largest value");
  s = {};
  s.generator = Generator::kUniform;
  s.param0 = -1.5e308;
  s.param1 = 1.5e308;  // high - low overflows
  refused(s, "past float64's largest value");
  s = {};
  s.generator = Generator::kArange;
  s.dtype = DType::kFloat32;
  s.param0 = 1e39;
  refused(s, "generated values can reach 1e+39, which float32 stores as infinity (from "
             "3.4028235677973366e+38 up; its largest value is 3.4028234663852886e+38)");
  s = {};
  s.generator = Generator::kConstant;
  s.param0 = 1e300;  // 6.25e10 selected elements of 1e300 each
  refused(s, "the sum of the 62500000000 selected ones");
  // Large but within range: taken.
  s.rows = s.cols = 100;
  s.chunk_rows = s.chunk_cols = 10;
  CHECK(validate(s));
}

TEST_CASE("every finite float32 value is a valid float32 constant, FLT_MAX and what rounds to it included",
          "[check]") {
  JobSpec s;
  s.generator = Generator::kConstant;
  s.dtype = DType::kFloat32;
  s.rows = s.cols = s.chunk_rows = s.chunk_cols = 1;
  s.scale = 1;
  s.offset = 0;
  for (const double v : {double(std::numeric_limits<float>::max()), -double(std::numeric_limits<float>::max()),
                         3.4028235e38 /* numpy's text of float32's largest */,
                         std::nextafter(std::ldexp(1.0, 128) - std::ldexp(1.0, 103), 0.0)}) {
    s.param0 = v;
    INFO(v);
    CHECK(validate(s));
  }
  s.param0 = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);  // rounds to infinity (ties to even)
  const Status st = validate(s);
  CHECK(st.message().find("generated values can reach 3.4028235677973366e+38, which float32 stores as "
                          "infinity") != std::string::npos);
}

TEST_CASE("an overflowed sum never checks ok", "[check]") {
  JobSpec s;
  s.rows = s.cols = 100;
  s.chunk_rows = s.chunk_cols = 10;
  const uint64_t n = expected_result(s).count;
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(check_result(s, PartialSum{inf, n, 0, 0}).find("overflowed float64") != std::string::npos);
  CHECK(check_result(s, PartialSum{std::nan(""), n, 0, 0}).find("overflowed float64") != std::string::npos);
}
