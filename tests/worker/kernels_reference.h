// What the CPU kernels' reduce tests compare against (kernels_test.cpp, plain_adds_test.cpp): every
// build this CPU runs, the scalar reference total, the transforms and data both use.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "core/partial.h"
#include "worker/cpu/kernels.h"

namespace psched::test {

// Every build this CPU can run (the baseline always).
inline std::vector<const CpuKernels*> runnable_builds() {
  std::vector<const CpuKernels*> out;
  for (const char* isa : {"baseline", "avx2", "avx512"})
    if (const CpuKernels* k = cpu_kernels_for(isa)) out.push_back(k);
  return out;
}

// The scalar reference: every element into one ExactSum, min and max as the kernels take them.
// With `squares`, each v's square too, split exactly as the kernels split it (overflowed: v*v only).
inline PartialSum reference_total(const std::vector<double>& x, uint64_t step, uint64_t n, double scale,
                                  double offset, bool squares = false) {
  PartialSum p;
  p.has_squares = squares;
  for (uint64_t j = 0; j < n; ++j) {
    const double v = x[j * step] * scale + offset;
    p.exact.add(v);
    if (squares) {
      const double h = v * v;
      p.squares.add(h);
      if (std::isfinite(h)) p.squares.add(std::fma(v, v, -h));
    }
    p.min = v < p.min ? v : p.min;
    p.max = v > p.max ? v : p.max;
  }
  p.exact.normalize();
  p.sum = p.exact.rounded();
  p.squares.normalize();
  return p;
}

// (scale, offset): a general one, the identity the kernels take elements as loaded for, and one
// that only looks like it (offset -0.0 keeps -0.0).
inline const std::pair<double, double> kTransforms[] = {{2.0, -1.0}, {1.0, 0.0}, {1.0, -0.0}};

// n elements of normal(10, 1).
inline std::vector<double> normal_data(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(10.0, 1.0);
  std::vector<double> out(n);
  for (double& v : out) v = normal(rng);
  return out;
}

}  // namespace psched::test
