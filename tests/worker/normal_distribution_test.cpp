// The normal generator's draws against the normal distribution (docs/design.md, "The element
// definition"): 10^8 standard normals from the CPU kernels (the same bits as every backend:
// kernels_test.cpp, tests/gpu/cuda_elements_test.cpp) have the mean, variance, skewness and
// excess kurtosis of N(0, 1) within five standard errors, pass a Kolmogorov-Smirnov test, and put
// as many draws beyond 2, 3, r (the ziggurat's tail), 4 and 4.5 as N(0, 1) does.
// The seed is fixed, so the test is deterministic: it fails only when the element definition
// stops drawing normals. Under a sanitizer it draws 10^7 (the bounds follow n).
#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/generators.h"
#include "worker/cpu/kernels.h"

using namespace psched;

namespace {

#if defined(__SANITIZE_ADDRESS__)  // PSCHED_SANITIZE (ASan with UBSan), as tests/support/loadgen_output.h tells it
constexpr uint64_t kDraws = 10'000'000;
#else
constexpr uint64_t kDraws = 100'000'000;
#endif
constexpr uint64_t kBlock = uint64_t{1} << 20;
constexpr int kCdfBins = 1 << 20;  // Phi(x) binned: the KS statistic at 2^20 points

// Beyond the ziggurat's r (its tail, 2.6e-4 of the draws) and further out, where the
// Kolmogorov-Smirnov test sees too little mass to tell.
constexpr double kTails[] = {2.0, 3.0, 3.6541528853610088, 4.0, 4.5};

struct Draws {
  long double sum[5] = {};  // sums of x^1 .. x^4 (index = power)
  uint64_t beyond[std::size(kTails)] = {};  // |x| > kTails[t]
  std::vector<uint64_t> cdf_bins = std::vector<uint64_t>(kCdfBins, 0);
};

Draws draw(uint64_t seed) {
  const GeneratorParams g{Generator::kNormal, 0.0, 1.0, seed};
  const CpuKernels& k = cpu_kernels();
  Draws d;
  std::vector<double> x(kBlock);
  for (uint64_t first = 0; first < kDraws; first += kBlock) {
    const uint64_t n = std::min(kBlock, kDraws - first);
    k.generate(g, /*to_float=*/false, first, 1, n, x.data(), /*streaming=*/false);
    double s[5] = {};  // per block in double, then long double: 2^20 terms lose nothing that matters here
    for (uint64_t i = 0; i < n; ++i) {
      const double v = x[i], v2 = v * v;
      s[1] += v;
      s[2] += v2;
      s[3] += v2 * v;
      s[4] += v2 * v2;
      const double u = 0.5 * std::erfc(-v * M_SQRT1_2);  // Phi(v)
      ++d.cdf_bins[std::min(kCdfBins - 1, int(u * kCdfBins))];
      for (size_t t = 0; t < std::size(kTails); ++t) d.beyond[t] += std::fabs(v) > kTails[t];
    }
    for (int p = 1; p <= 4; ++p) d.sum[p] += s[p];
  }
  return d;
}

}  // namespace

TEST_CASE("10^8 normal draws have N(0, 1)'s moments and pass Kolmogorov-Smirnov", "[distribution]") {
  const Draws d = draw(20261126);
  const long double n = kDraws;
  const long double mean = d.sum[1] / n;
  const long double m2 = d.sum[2] / n - mean * mean;
  const long double m3 = d.sum[3] / n - 3 * mean * d.sum[2] / n + 2 * mean * mean * mean;
  const long double m4 = d.sum[4] / n - 4 * mean * d.sum[3] / n + 6 * mean * mean * d.sum[2] / n -
                         3 * mean * mean * mean * mean;
  const double skewness = double(m3 / std::pow(m2, 1.5L));
  const double kurtosis = double(m4 / (m2 * m2) - 3);
  // Standard errors for N(0, 1): mean 1/sqrt(n), variance sqrt(2/n), skewness sqrt(6/n), excess
  // kurtosis sqrt(24/n).
  const double root_n = std::sqrt(double(kDraws));
  INFO("mean " << double(mean) << ", variance " << double(m2) << ", skewness " << skewness
               << ", excess kurtosis " << kurtosis << " over " << kDraws << " draws");
  CHECK(std::fabs(double(mean)) < 5 / root_n);
  CHECK(std::fabs(double(m2) - 1) < 5 * std::sqrt(2.0) / root_n);
  CHECK(std::fabs(skewness) < 5 * std::sqrt(6.0) / root_n);
  CHECK(std::fabs(kurtosis) < 5 * std::sqrt(24.0) / root_n);

  // KS: the empirical CDF of Phi(x) against the uniform one at the bins' edges; between edges it
  // can differ by at most one bin's mass more, which the bound allows for. 1.95 / sqrt(n) is the
  // critical value at the 0.1% level.
  uint64_t below = 0;
  double ks = 0, worst_bin = 0;
  for (int b = 0; b < kCdfBins; ++b) {
    below += d.cdf_bins[b];
    ks = std::max(ks, std::fabs(double(below) / double(kDraws) - double(b + 1) / kCdfBins));
    worst_bin = std::max(worst_bin, double(d.cdf_bins[b]) / double(kDraws));
  }
  INFO("KS statistic " << ks << " (+ at most " << worst_bin << " between edges), critical "
                       << 1.95 / root_n);
  CHECK(ks + worst_bin < 1.95 / root_n);

  // The tails: each count within five standard deviations of n erfc(t / sqrt 2).
  for (size_t t = 0; t < std::size(kTails); ++t) {
    const double p = std::erfc(kTails[t] / std::sqrt(2.0));
    INFO(d.beyond[t] << " draws beyond +-" << kTails[t] << ", expected " << double(kDraws) * p);
    CHECK(std::fabs(double(d.beyond[t]) - double(kDraws) * p) < 5 * std::sqrt(double(kDraws) * p * (1 - p)));
  }
}
