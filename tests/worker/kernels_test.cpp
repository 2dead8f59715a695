#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/generators.h"
#include "tests/support/edge_uniforms.h"
#include "worker/cpu/kernels.h"

using namespace psched;

namespace {

// Every build this CPU can run (the baseline always).
std::vector<const CpuKernels*> runnable_builds() {
  std::vector<const CpuKernels*> out;
  for (const char* isa : {"baseline", "avx2", "avx512"})
    if (const CpuKernels* k = cpu_kernels_for(isa)) out.push_back(k);
  return out;
}

std::vector<double> generated(const CpuKernels& k, const GeneratorParams& g, uint64_t first,
                              uint64_t stride, uint64_t n, bool to_float = false) {
  std::vector<double> out(n);
  k.generate(g, to_float, first, stride, n, out.data(), /*streaming=*/false);
  return out;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

// Indices that reach past 2^32 and 2^53 as well as the start of the array.
const uint64_t kFirsts[] = {0, 5, (uint64_t{1} << 32) - 3, uint64_t{1} << 40, (uint64_t{1} << 53) + 1,
                            ~uint64_t{0} - 100};

}  // namespace

TEST_CASE("CPU kernels give every generator bit for bit as element_value, float32 as its rounding", "[kernels]") {
  const GeneratorParams gens[] = {{Generator::kArange, 5.0, 3.0, 0}, {Generator::kArange, -0.1, 1e-3, 0}, {Generator::kConstant, 2.5, 0.0, 0},
                                  {Generator::kUniform, -2.0, 3.0, 7}, {Generator::kUniform, 0.0, 1.0, 0xdeadbeefcafef00du},
                                  {Generator::kNormal, 10.0, 1.0, 42}, {Generator::kNormal, 0.0, 1.0, ~uint64_t{0}}};
  for (const CpuKernels* k : runnable_builds()) {
    for (const GeneratorParams& g : gens) {
      for (uint64_t first : kFirsts) {
        for (uint64_t stride : {1, 2, 3, 1000}) {
          INFO(k->isa << " kind " << int(g.kind) << " first " << first << " stride " << stride);
          const auto v = generated(*k, g, first, stride, 37);
          for (uint64_t i = 0; i < v.size(); ++i)
            REQUIRE(same_bits(v[i], element_value(g, first + i * stride)));
          const auto f = generated(*k, g, first, stride, 11, /*to_float=*/true);
          for (uint64_t i = 0; i < f.size(); ++i)
            REQUIRE(same_bits(f[i], double(float(element_value(g, first + i * stride)))));
        }
      }
    }
  }
}

TEST_CASE("every CPU build gives the scalar reference's normal bits on millions of (seed, index) pairs", "[kernels]") {
  // 2^20 elements from each of four (seed, first index) places, float64 and float32: the
  // reference once, every build against it. Pairs (2m, 2m + 1) share a block: computed once.
  const auto builds = runnable_builds();
  const uint64_t n = uint64_t{1} << 20;
  const std::pair<uint64_t, uint64_t> places[] = {
      {42, 0}, {3, (uint64_t{1} << 32) - 1000}, {0xfeedface12345678u, uint64_t{1} << 45}, {~uint64_t{0}, 12344}};
  for (const auto& [seed, first] : places) {
    const GeneratorParams g{Generator::kNormal, 10.0, 2.0, seed};
    std::vector<double> want(n);
    for (uint64_t i = 0; i < n; i += 2) {  // first is even
      const NormalPair z = box_muller(uniform_pair(seed, (first + i) >> 1));
      want[i] = mul_add_rounded(g.param1, z.even, g.param0);
      want[i + 1] = mul_add_rounded(g.param1, z.odd, g.param0);
    }
    for (const CpuKernels* k : builds) {
      INFO(k->isa << " seed " << seed << " first " << first);
      const auto v = generated(*k, g, first, 1, n);
      const auto f = generated(*k, g, first, 1, n, /*to_float=*/true);
      uint64_t differ = 0, differ_f32 = 0;
      for (uint64_t i = 0; i < n; ++i) {
        differ += !same_bits(v[i], want[i]);
        differ_f32 += !same_bits(f[i], double(float(want[i])));
      }
      CHECK(differ == 0);
      CHECK(differ_f32 == 0);
    }
  }
}

TEST_CASE("every CPU build gives the scalar reference's Box-Muller pair at the edge uniforms", "[kernels]") {
  const auto [u0, u1] = test::edge_uniform_pairs();
  for (const CpuKernels* k : runnable_builds()) {
    std::vector<double> even(u0.size()), odd(u0.size());
    k->box_muller(u0.data(), u1.data(), u0.size(), even.data(), odd.data());
    for (size_t i = 0; i < u0.size(); ++i) {
      INFO(k->isa << " u0 " << u0[i] << " u1 " << u1[i]);
      const NormalPair want = box_muller(UniformPair{u0[i], u1[i]});
      REQUIRE(same_bits(even[i], want.even));
      REQUIRE(same_bits(odd[i], want.odd));
    }
  }
}

TEST_CASE("CPU kernels reduce lane j % 8 of a strided run, the same on every build", "[kernels]") {
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(double(i)) * 1e3;
  for (const CpuKernels* k : runnable_builds()) {
    for (uint64_t step : {1, 2, 7}) {
      for (uint64_t n : {0, 5, 8, 13, 100}) {
        INFO(k->isa << " step " << step << " n " << n);
        ReduceLanes lanes;
        lanes_init(lanes);
        k->reduce(x.data(), step, n, 2.0, -1.0, lanes);
        ReduceLanes want;
        lanes_init(want);
        for (uint64_t j = 0; j < n; ++j) {
          const double v = x[j * step] * 2.0 - 1.0;
          want.sum[j % 8] += v;
          want.min[j % 8] = std::min(want.min[j % 8], v);
          want.max[j % 8] = std::max(want.max[j % 8], v);
        }
        for (int l = 0; l < 8; ++l) {
          CHECK(same_bits(lanes.sum[l], want.sum[l]));
          CHECK(lanes.min[l] == want.min[l]);
          CHECK(lanes.max[l] == want.max[l]);
        }
      }
    }
  }
}

TEST_CASE("streaming stores give the same bits at any alignment and length", "[kernels]") {
  const GeneratorParams gens[] = {{Generator::kNormal, 10.0, 1.0, 42}, {Generator::kUniform, -2.0, 3.0, 7}, {Generator::kArange, 5.0, 3.0, 0}, {Generator::kConstant, 2.5, 0.0, 0}};
  for (const CpuKernels* k : runnable_builds()) {
    for (const GeneratorParams& g : gens) {
      for (const uint64_t n : {uint64_t{1}, uint64_t{15}, uint64_t{64}, uint64_t{1001}}) {
        for (const size_t misalign : {size_t{0}, size_t{1}, size_t{3}}) {  // in doubles: 0, 8, 24 bytes
          INFO(k->isa << " generator " << int(g.kind) << " n " << n << " offset " << misalign);
          const std::vector<double> plain = generated(*k, g, 6, 1, n);
          // 64-byte aligned storage, written from `misalign` doubles in.
          std::vector<double> storage(n + 16, -1.0);
          double* base = storage.data();
          while (reinterpret_cast<uintptr_t>(base) % 64 != 0) ++base;
          double* out = base + misalign;
          k->generate(g, false, 6, 1, n, out, /*streaming=*/true);
          streaming_fence();
          for (uint64_t i = 0; i < n; ++i) REQUIRE(same_bits(out[i], plain[i]));
          CHECK(out[n] == -1.0);  // nothing written past the end
        }
      }
    }
  }
}
