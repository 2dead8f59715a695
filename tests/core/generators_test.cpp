#include <catch2/catch.hpp>

#include <cmath>

#include "core/generators.h"

using namespace psched;

TEST_CASE("Philox4x32-10 matches the Random123 known-answer vectors", "[generators]") {
  const auto zero = philox4x32_10(0, 0, 0, 0, 0, 0);
  CHECK(zero.v[0] == 0x6627e8d5u);
  CHECK(zero.v[1] == 0xe169c58du);
  CHECK(zero.v[2] == 0xbc57ac4cu);
  CHECK(zero.v[3] == 0x9b00dbd8u);
  const auto ones = philox4x32_10(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu);
  CHECK(ones.v[0] == 0x408f276du);
  CHECK(ones.v[1] == 0x41c83b0eu);
  CHECK(ones.v[2] == 0xa20bc7c6u);
  CHECK(ones.v[3] == 0x6d5451fdu);
  const auto pi = philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.v[0] == 0xd16cfe09u);
  CHECK(pi.v[1] == 0x94fdccebu);
  CHECK(pi.v[2] == 0x5001e420u);
  CHECK(pi.v[3] == 0x24126ea1u);
}

TEST_CASE("arange and constant are exact functions of the global index", "[generators]") {
  const GeneratorParams arange{Generator::kArange, 5.0, 3.0, 0};
  CHECK(element_value(arange, 0) == 5.0);
  CHECK(element_value(arange, 1000000) == 3000005.0);
  const GeneratorParams constant{Generator::kConstant, 2.5, 0.0, 0};
  CHECK(element_value(constant, 123) == 2.5);
}

TEST_CASE("normal(10, 1) has mean 10 and std 1 over a million elements", "[generators]") {
  const GeneratorParams normal{Generator::kNormal, 10.0, 1.0, 42};
  double sum = 0, sum2 = 0;
  const int n = 1000000;
  for (int i = 0; i < n; ++i) {
    const double v = element_value(normal, uint64_t(i));
    sum += v;
    sum2 += v * v;
  }
  const double mean = sum / n;
  const double var = sum2 / n - mean * mean;
  CHECK(std::fabs(mean - 10.0) < 6.0 / std::sqrt(double(n)));
  CHECK(std::fabs(var - 1.0) < 0.01);
}

TEST_CASE("uniform(low, high) stays at or above low and below high, and seeds give different streams", "[generators]") {
  const GeneratorParams a{Generator::kUniform, -2.0, 3.0, 1};
  const GeneratorParams b{Generator::kUniform, -2.0, 3.0, 2};
  int same = 0;
  for (uint64_t i = 0; i < 10000; ++i) {
    const double va = element_value(a, i);
    REQUIRE(va >= -2.0);
    REQUIRE(va < 3.0);
    same += va == element_value(b, i);
  }
  CHECK(same == 0);
}
