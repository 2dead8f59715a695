// Philox words at the edges of the normal generator's ziggurat (core/generators.h), which Philox
// draws rarely: tests feed them to every backend (the CPU builds in
// tests/worker/kernels_test.cpp, the GPU in tests/gpu/cuda_elements_test.cpp) and compare bits.
#pragma once

#include <cstdint>
#include <vector>

#include "core/element_math.h"

namespace psched::test {

struct NormalWords {
  std::vector<uint64_t> index, words;  // element index (its slow path's draws), its word
};

// Layers at both ends and between (0: the base strip and the tail; 255: the top, always the
// wedge), each with j around 0, around its threshold k_i (the fast path's last and the slow path's
// first) and at the top of 2^53; both signs, the unused bits 9 and 10 clear and set; each word at
// its own element index, so their slow paths draw differently.
inline NormalWords edge_normal_words() {
  constexpr uint64_t kTop = uint64_t{1} << 53;
  const uint32_t layers[] = {0, 1, 2, 3, 100, 127, 128, 200, 253, 254, 255};
  NormalWords out;
  uint64_t n = 0;
  for (uint32_t i : layers) {
    const uint64_t k = uint64_t(element_math::kZigguratFast[i].k);
    const uint64_t js[] = {0, 1, 2, k - 2, k - 1, k, k + 1, k + 2, kTop - 2, kTop - 1};
    for (uint64_t j : js) {
      if (j >= kTop) continue;  // k - 2 wraps for the top layer's k = 0
      for (uint64_t sign = 0; sign < 2; ++sign) {
        for (uint64_t pad : {uint64_t{0}, uint64_t{3}}) {
          out.words.push_back(j << 11 | pad << 9 | sign << 8 | i);
          out.index.push_back((uint64_t{1} << 40) + 1000003 * n++);
        }
      }
    }
  }
  return out;
}

}  // namespace psched::test
