// core/element_math.h against x87 long double (64-bit significands, so the reference's own error
// is ~2^-11 of a double's ulp): the accuracy docs/design.md states for the normal generator's log,
// sin and cos, over millions of the uniforms the generator can draw, the edges included.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/element_math.h"
#include "core/generators.h"

using namespace psched;
using Ops = element_math::HostOps;

namespace {

constexpr uint64_t kTwo53 = uint64_t{1} << 53;

// |got - want| in units of the last place of the double nearest want.
double ulp_error(double got, long double want) {
  int exponent = 0;
  std::frexp(double(want), &exponent);
  return double(std::fabs((long double)got - want)) / std::ldexp(1.0, exponent - 53);
}

// sin and cos of 2 pi u, reduced exactly in u first (t = 4u, q = nearest integer), so the
// reference has no error from an inexact 2 pi u.
void reference_sincos(double u, long double& sin_ref, long double& cos_ref) {
  const long double t = 4.0L * u, q = std::nearbyint(t);
  const long double a = (t - q) * 1.5707963267948966192313216916397514L;
  const long double s = std::sin(a), c = std::cos(a);
  switch (int(q) & 3) {
    case 0: sin_ref = s, cos_ref = c; break;
    case 1: sin_ref = c, cos_ref = -s; break;
    case 2: sin_ref = -s, cos_ref = -c; break;
    default: sin_ref = -c, cos_ref = s; break;
  }
}

// Counters n of uniforms n 2^-53: random ones, ones near 0 and near 2^53 (both ends of the
// uniform), and ones near multiples of 2^50 (u near k/8: the quadrant boundaries k/4, whose r is
// 0, and the ties in between, whose r is +-1/2).
std::vector<uint64_t> counters(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out;
  out.reserve(n + 200);
  for (uint64_t j = 0; j < 40; ++j) {
    out.push_back(j);
    out.push_back(kTwo53 - 1 - j);
    for (uint64_t k = 1; k < 8; ++k) {
      out.push_back((k << 50) + j);
      out.push_back((k << 50) - 1 - j);
    }
  }
  while (out.size() < n) {
    const uint64_t r = rng() >> 11;
    switch (out.size() % 4) {
      case 0: out.push_back(r); break;
      case 1: out.push_back(r >> (r % 53)); break;                        // small n: u near 0
      case 2: out.push_back(kTwo53 - 1 - (r >> (r % 53))); break;         // u near 1
      default: {                                                          // near k/8
        const uint64_t k = ((r >> 1) % 8) << 50, offset = (r >> 12) >> (r % 48);
        out.push_back((r & 1) ? k + offset : k - offset);
      }
    }
    out.back() &= kTwo53 - 1;
  }
  return out;
}

}  // namespace

TEST_CASE("element_math's log is within 0.65 ulp of log(1 - u) for every kind of uniform", "[element_math]") {
  double worst = 0;
  int not_negative = 0;
  for (uint64_t n : counters(1, 3000000)) {
    const double x = 1.0 - double(n) * 0x1p-53;  // exact, in [2^-53, 1]
    const double got = element_math::log_unit<Ops>(x);
    if (n == 0) {
      REQUIRE(got == 0.0);  // log(1) = 0 exactly
      continue;
    }
    if (!(got < 0.0)) ++not_negative;  // the radius's square root needs -2 log(x) >= 0
    worst = std::max(worst, ulp_error(got, std::log((long double)x)));
  }
  INFO("max error " << worst << " ulp");
  CHECK(worst < 0.65);
  CHECK(not_negative == 0);
}

TEST_CASE("element_math's sin and cos of 2 pi u are within 0.75 ulp, quadrant edges and ties included", "[element_math]") {
  double worst_sin = 0, worst_cos = 0;
  for (uint64_t n : counters(2, 3000000)) {
    const double u = double(n) * 0x1p-53;
    const element_math::SinCos<double> got = element_math::sincos_2pi<Ops>(u);
    long double sin_ref, cos_ref;
    reference_sincos(u, sin_ref, cos_ref);
    if (sin_ref == 0) REQUIRE(got.sin == 0.0);
    else worst_sin = std::max(worst_sin, ulp_error(got.sin, sin_ref));
    if (cos_ref == 0) REQUIRE(got.cos == 0.0);
    else worst_cos = std::max(worst_cos, ulp_error(got.cos, cos_ref));
  }
  INFO("max error: sin " << worst_sin << " ulp, cos " << worst_cos << " ulp");
  CHECK(worst_sin < 0.75);
  CHECK(worst_cos < 0.75);
}

TEST_CASE("sin and cos of 2 pi u are exact at multiples of 1/4", "[element_math]") {
  const double want_sin[] = {0, 1, 0, -1, 0}, want_cos[] = {1, 0, -1, 0, 1};
  for (int k = 0; k < 4; ++k) {
    const element_math::SinCos<double> got = element_math::sincos_2pi<Ops>(0.25 * k);
    CHECK(got.sin == want_sin[k]);
    CHECK(got.cos == want_cos[k]);
  }
}

TEST_CASE("the normal pair's elements are within 2.5 ulp of sqrt(-2 log(1 - u0)) cos and sin", "[element_math]") {
  const std::vector<uint64_t> n0 = counters(3, 1000000), n1 = counters(4, 1000000);
  double worst = 0;
  for (size_t i = 0; i < n0.size() && i < n1.size(); ++i) {
    if (n0[i] == 0) continue;  // radius 0
    const UniformPair u{double(n0[i]) * 0x1p-53, double(n1[i]) * 0x1p-53};
    const NormalPair z = box_muller(u);
    const long double radius = std::sqrt(-2.0L * std::log(1.0L - (long double)u.u0));
    long double sin_ref, cos_ref;
    reference_sincos(u.u1, sin_ref, cos_ref);
    if (cos_ref != 0) worst = std::max(worst, ulp_error(z.even, radius * cos_ref));
    if (sin_ref != 0) worst = std::max(worst, ulp_error(z.odd, radius * sin_ref));
  }
  INFO("max error " << worst << " ulp");
  CHECK(worst < 2.5);
}
