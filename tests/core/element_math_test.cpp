// core/element_math.h against x87 long double (64-bit significands, so the reference's own error
// is ~2^-11 of a double's ulp): the accuracy docs/design.md states for the normal generator's log
// over millions of the uniforms it can take, the edges included; the ziggurat's tables against the
// curve they stand for, and each of its paths' ranges (core/generators.h).
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

// Counters n of uniforms n 2^-53: random ones, ones near 0 and near 2^53 (both ends of the
// uniform), and ones near multiples of 2^50 (u near k/8).
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

namespace {

long double f(long double x) { return std::exp(-x * x / 2); }

// Layer i's x_i (the table keeps x_i 2^-53, exactly scaled) and x_(i+1), x_N = 0.
long double layer_x(int i) {
  return i < element_math::kZigguratLayers ? std::ldexp((long double)element_math::kZigguratFast[i].w, 53) : 0.0L;
}

}  // namespace

TEST_CASE("the ziggurat's layers have one area, close at f = 1 and agree with their thresholds", "[element_math]") {
  const long double r = element_math::kZigguratR;
  const long double tail = std::sqrt(std::acos(-1.0L) / 2) * std::erfc(r / std::sqrt(2.0L));
  const long double v = r * f(r) + tail;
  CHECK(std::fabs(layer_x(1) - r) == 0);
  CHECK(std::fabs(layer_x(0) * f(r) - v) < 1e-15L * v);  // the base strip, tail included
  double worst = 0;
  for (int i = 1; i < element_math::kZigguratLayers; ++i) {
    const element_math::ZigguratWedge w = element_math::kZigguratWedge[i];
    INFO("layer " << i);
    CHECK(std::fabs(w.f - f(layer_x(i))) < 1e-15L);
    CHECK(std::fabs(w.f + w.d - f(layer_x(i + 1))) < 1e-15L);  // the top: f(0) = 1
    worst = std::max(worst, double(std::fabs(layer_x(i) * (f(layer_x(i + 1)) - f(layer_x(i))) - v) / v));
  }
  INFO("worst area error " << worst << " of v");
  CHECK(worst < 1e-12);
  for (int i = 0; i < element_math::kZigguratLayers; ++i) {
    const long double k = element_math::kZigguratFast[i].k;
    INFO("layer " << i);
    CHECK(k == std::floor(k));
    CHECK(std::fabs(k - std::ldexp(layer_x(i + 1) / layer_x(i), 53)) <= 4);  // x_i rounded: 2^-53 each
  }
}

TEST_CASE("each path of the ziggurat draws from its own range", "[element_math]") {
  constexpr uint64_t kTop = uint64_t{1} << 53;
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 200000; ++trial) {
    const uint64_t w = rng(), index = rng() >> 1;
    const uint32_t i = uint32_t(w & 0xff);
    const uint64_t j = w >> 11;
    const double z = ziggurat(3, index, w);
    INFO("word " << w << " layer " << i << " j " << j << " z " << z);
    if (double(j) < element_math::kZigguratFast[i].k) {  // a restart takes its new word's sign
      REQUIRE(std::signbit(z) == ((w >> 8) & 1));
      REQUIRE(std::fabs(z) < layer_x(i + 1));  // under the curve: the point itself
      REQUIRE(std::fabs(z) == double(j) * element_math::kZigguratFast[i].w);
    }
  }
  // Layer 0 past its threshold always ends in the tail, beyond r, with the word's sign.
  const uint64_t k0 = uint64_t(element_math::kZigguratFast[0].k);
  for (uint64_t j = k0; j < k0 + 2000 && j < kTop; ++j) {
    for (uint64_t sign = 0; sign < 2; ++sign) {
      const double z = ziggurat(11, j * 7, j << 11 | sign << 8);
      REQUIRE(std::fabs(z) > element_math::kZigguratR);
      REQUIRE(std::fabs(z) < 40.0);
      REQUIRE(std::signbit(z) == bool(sign));
    }
  }
  // The top layer (k = 0) always takes the wedge test; what it accepts lies in [0, x_255).
  int wedges = 0;
  for (uint64_t j = 0; j < 4000; ++j) {
    const uint64_t w = (j * 0x9e3779b97f4a7c15u % kTop) << 11 | 255;
    const double z = ziggurat(12, j, w);
    if (std::fabs(z) < layer_x(255)) ++wedges;
  }
  // Near 0 the curve is 1 - x^2 / 2, so the wedge accepts about 2/3 of its draws; the other third
  // start again and end below x_255 as often as a normal does. Within five standard deviations.
  const double p = 2.0 / 3 + std::erf(double(layer_x(255)) / std::sqrt(2.0)) / 3;
  INFO(wedges << " of 4000 top-layer words ended below x_255; expected " << 4000 * p);
  CHECK(std::fabs(wedges - 4000 * p) < 5 * std::sqrt(4000 * p * (1 - p)));
}
