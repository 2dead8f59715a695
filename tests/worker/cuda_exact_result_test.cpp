// The exact reduction's arithmetic that the CUDA kernels share with the host (worker/cuda/
// exact_result.h), checked where CI has no GPU: a thread's TwoSum expansion loses nothing, the order
// keys of min and max order every double, and a chunk's compact result holds its exact sum.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "worker/cuda/exact_result.h"

using namespace psched;
using namespace psched::gpu;

namespace {

// Doubles of every kind: random bits (finite), small integers, values near 1 and near each other
// (cancellation), subnormals, and some near the top of the range.
std::vector<double> hostile_doubles(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<double> out;
  while (out.size() < n) {
    double x = 0;
    switch (rng() % 6) {
      case 0: {
        const uint64_t b = rng();
        std::memcpy(&x, &b, sizeof x);
        if (!std::isfinite(x)) continue;
        break;
      }
      case 1: x = double(int64_t(rng() % 2001) - 1000); break;
      case 2: x = 1.0 + std::ldexp(double(rng() >> 11), -53) * ((rng() & 1) ? -1 : 1); break;
      case 3: x = std::ldexp(double(rng() >> 12), -1074) * ((rng() & 1) ? -1 : 1); break;
      case 4: x = std::numeric_limits<double>::max() / double(2 + rng() % 5); break;
      default: x = std::ldexp(double(rng() >> 11), int(rng() % 200) - 150); break;
    }
    out.push_back(x);
  }
  return out;
}

// values through one expansion (Expansion::add_or_empty): what it handed back plus its terms at
// the end (got), the exact sum of the values (want), and how many it handed back.
struct Summed {
  ExactSum want, got;
  size_t handed_back = 0;
};
Summed summed(const std::vector<double>& values) {
  Summed s;
  Expansion e;
  for (double v : values) {
    s.want.add(v);
    e.add_or_empty(v, [&](double x) {
      s.got.add(x);
      ++s.handed_back;
    });
  }
  s.got.add(e.hi);
  s.got.add(e.lo);
  return s;
}

}  // namespace

TEST_CASE("a TwoSum expansion plus what it hands back is the exact sum", "[exact][cuda]") {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<double> values = hostile_doubles(seed, 5000);
    const Summed s = summed(values);
    INFO("seed " << seed << ", handed back " << s.handed_back);
    CHECK(same_value(s.got, s.want));
  }
}

TEST_CASE("a TwoSum expansion of ordinary data hands nothing back", "[exact][cuda]") {
  // normal(10, 1)-like values: every sum fits the two terms, so the device adds to shared memory
  // only once per thread.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(11.0, 1.0);
  Expansion e;
  ExactSum want, got;
  for (int i = 0; i < 200000; ++i) {
    const double v = normal(rng);
    want.add(v);
    CHECK(e.add(v) == 0.0);
  }
  got.add(e.hi);
  got.add(e.lo);
  CHECK(same_value(got, want));
}

TEST_CASE("an expansion emptied after a hand-back spills a few times per huge element, not per later one",
          "[exact][cuda]") {
  // normal(11, 1) with 20 elements of netCDF's fill value: an expansion that kept 9.97e36 beside
  // its ordinary sum handed back nearly every later element (a shared-memory add each on the
  // device); add_or_empty hands back the element's error and the two terms, and starts again.
  std::mt19937_64 rng(45);
  std::normal_distribution<double> normal(11.0, 1.0);
  std::vector<double> values(100000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = i % 4999 == 17 ? 9.96921e36 : normal(rng);
  const Summed s = summed(values);
  CHECK(s.handed_back <= 20 * 6);
  CHECK(same_value(s.got, s.want));
}

TEST_CASE("order keys order every non-NaN double, -0 below +0, and are never 0", "[exact][cuda]") {
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> sorted = {-inf, -std::numeric_limits<double>::max(), -1.5, -1.0,
                                -std::numeric_limits<double>::denorm_min(), -0.0, 0.0,
                                std::numeric_limits<double>::denorm_min(), 1e-300, 1.0, 2.0,
                                std::numeric_limits<double>::max(), inf};
  for (size_t i = 0; i < sorted.size(); ++i) {
    INFO(sorted[i]);
    CHECK(order_key(sorted[i]) != 0);
    CHECK(~order_key(sorted[i]) != 0);
    const double back = from_order_key(order_key(sorted[i]));
    CHECK(std::memcmp(&sorted[i], &back, sizeof back) == 0);
    if (i > 0) CHECK(order_key(sorted[i - 1]) < order_key(sorted[i]));
  }
}

TEST_CASE("a chunk's compact result holds its exact sum, min and max", "[exact][cuda]") {
  const double inf = std::numeric_limits<double>::infinity();
  SECTION("nothing added: sum 0, min +inf, max -inf") {
    const ChunkResult r = compact_result(ChunkAccumulator{});
    CHECK_FALSE(r.wide);
    CHECK(r.min == inf);
    CHECK(r.max == -inf);
    CHECK(exact_from(r, nullptr).rounded() == 0.0);
  }
  SECTION("narrow and wide sums of either sign, with unnormalised digits") {
    for (uint64_t seed = 1; seed <= 200; ++seed) {
      std::mt19937_64 rng(seed);
      ChunkAccumulator a{};
      const int span = int(rng() % 40) + 1;  // elements within 2^span of each other
      const int base = int(rng() % 1800) - 1000;
      const double sign = (seed % 2) ? 1.0 : -1.0;
      double lo = inf, hi = -inf;
      for (int i = 0; i < 300; ++i) {
        const double v = std::ldexp(double(rng() >> 11), base + int(rng() % uint64_t(span))) *
                         ((rng() % 4) ? sign : -sign);
        a.exact.add(v);
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      a.min_key = ~order_key(lo);
      a.max_key = order_key(hi);
      const ChunkResult r = compact_result(a);
      INFO("seed " << seed << " span " << span << " wide " << int(r.wide));
      CHECK(same_value(exact_from(r, &a), a.exact));
      // The worker's terms straight from the window: those of the accumulator, bit for bit.
      const ExactTerms want(a.exact), got = exact_terms_from(r, &a);
      REQUIRE(got.size() == want.size());
      for (size_t t = 0; t < want.size(); ++t)
        CHECK(std::memcmp(&got.data()[t], &want.data()[t], sizeof(double)) == 0);
      const double got_sum = got.rounded(), want_sum = want.rounded();
      CHECK(std::memcmp(&got_sum, &want_sum, sizeof(double)) == 0);
      CHECK(r.min == lo);
      CHECK(r.max == hi);
      if (span < 60) CHECK_FALSE(r.wide);  // 53 + span bits fit six digits with room to spare
    }
  }
  SECTION("a window at the top of the range (its zero digits reach past digit 67)") {
    for (const bool negative : {false, true}) {
      ChunkResult r{};
      r.low = int16_t(kExactDigits - 2);
      r.window[0] = 5;
      r.window[1] = 1;
      r.negative = negative;
      const ExactTerms want(exact_from(r, nullptr)), got = exact_terms_from(r, nullptr);
      REQUIRE(got.size() == want.size());
      for (size_t t = 0; t < want.size(); ++t) CHECK(got.data()[t] == want.data()[t]);
      CHECK(got.nan == 0);
      CHECK(got.pos_inf == 0);
      CHECK(got.neg_inf == 0);
    }
  }
  SECTION("specials make a result wide") {
    ChunkAccumulator a{};
    a.exact.add(1.0);
    a.exact.add(std::numeric_limits<double>::quiet_NaN());
    const ChunkResult r = compact_result(a);
    CHECK(r.wide);
    CHECK(std::isnan(exact_from(r, &a).rounded()));
  }
}
