// The uniforms at the edges of the normal generator's arithmetic (core/element_math.h), which
// Philox rarely draws: tests feed their Box-Muller pairs to every backend (the CPU builds in
// tests/worker/kernels_test.cpp, the GPU in tests/gpu/cuda_elements_test.cpp) and compare bits.
#pragma once

#include <vector>

namespace psched::test {

struct UniformPairs {
  std::vector<double> u0, u1;
};

// Every u0 edge with every u1 edge. u0: 0 (radius 0), tiny, around 1/2, 1 - 2^-53 (the largest
// radius), and where 1 - u0 meets the log's sqrt(2)/2 switch; u1: at and next to each multiple of
// 1/8 (the quadrant boundaries k/4, where r = 0, and the ties of 4 u1 half way between integers).
inline UniformPairs edge_uniform_pairs() {
  const double edges0[] = {0.0, 0x1p-53, 0x1p-52, 3 * 0x1p-53, 0x1p-30, 0.25, 0.5 - 0x1p-53, 0.5,
                           0.5 + 0x1p-53, 1 - 0x1p-52, 1 - 0x1p-53, 1 - 0.70710678118654752,
                           1 - 0.70710678118654757, 1 - 0.7071069, 1 - 0.35355339059327376};
  UniformPairs out;
  for (double a : edges0) {
    for (int k = 0; k < 8; ++k) {
      for (int j = -3; j <= 3; ++j) {
        const double b = k / 8.0 + j * 0x1p-53;
        if (b < 0 || b >= 1) continue;
        out.u0.push_back(a);
        out.u1.push_back(b);
      }
    }
  }
  return out;
}

}  // namespace psched::test
