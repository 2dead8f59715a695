#include "worker/cpu/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>

namespace psched {

extern const CpuKernels kCpuKernelsBaseline;
#if defined(PSCHED_CPU_KERNELS_X86)
extern const CpuKernels kCpuKernelsAvx2;
extern const CpuKernels kCpuKernelsAvx512;
#endif

void lanes_init(ReduceLanes& lanes) {
  for (int l = 0; l < 8; ++l) {
    lanes.hi[l] = lanes.lo[l] = 0.0;
    lanes.min[l] = std::numeric_limits<double>::infinity();
    lanes.max[l] = -std::numeric_limits<double>::infinity();
  }
  lanes.exact = ExactSum{};
  lanes.spills = 0;
  lanes.optimistic_runs = 0;
  lanes.optimism_rest = 0;
  lanes.quantum = kQuantumNone;
}

void lanes_spill(ReduceLanes& lanes, double x) {
  // Three spills per element at most (an error and the lane's two emptied terms: lane_add; a chunk
  // has under 2^31 elements), plus the lanes' final 16: whatever their number, normalising every
  // 2^30 keeps every digit far inside int64.
  if (++lanes.spills == (uint64_t{1} << 30)) {
    lanes.exact.normalize();
    lanes.spills = 0;
  }
  lanes.exact.add(x);
}

namespace {

// The lanes' expansions into lanes.exact (left unnormalised), their min and max into out.
template <typename Partial>
void lanes_gather(ReduceLanes& lanes, Partial& out) {
  for (int l = 0; l < 8; ++l) {
    lanes_spill(lanes, lanes.hi[l]);
    lanes_spill(lanes, lanes.lo[l]);
    lanes.hi[l] = lanes.lo[l] = 0.0;
  }
  lanes.spills = 0;
  lanes.quantum = kQuantumNone;
  out.min = lanes.min[0];
  out.max = lanes.max[0];
  for (int l = 1; l < 8; ++l) {
    out.min = lanes.min[l] < out.min ? lanes.min[l] : out.min;
    out.max = lanes.max[l] > out.max ? lanes.max[l] : out.max;
  }
}

}  // namespace

void lanes_total(ReduceLanes& lanes, PartialSum& out) {
  lanes_gather(lanes, out);
  lanes.exact.normalize();
  out.exact = lanes.exact;
  out.sum = out.exact.rounded();
}

void lanes_total(ReduceLanes& lanes, CompactPartial& out) {
  lanes_gather(lanes, out);
  out.exact = ExactTerms(lanes.exact);
  out.sum = out.exact.rounded();
}

namespace {

// Both halves' lanes into squares.high.exact, normalised.
ExactSum& squares_gathered(SquareLanes& squares) {
  for (ReduceLanes* half : {&squares.high, &squares.low}) {
    for (int l = 0; l < 8; ++l) {
      lanes_spill(*half, half->hi[l]);
      lanes_spill(*half, half->lo[l]);
      half->hi[l] = half->lo[l] = 0.0;
    }
    half->spills = 0;
    half->quantum = kQuantumNone;
    half->exact.normalize();
  }
  squares.high.exact.add(squares.low.exact);
  squares.high.exact.normalize();
  return squares.high.exact;
}

}  // namespace

void lanes_squares_total(SquareLanes& squares, PartialSum& out) {
  out.has_squares = true;
  out.squares = squares_gathered(squares);
}

void lanes_squares_total(SquareLanes& squares, CompactPartial& out) {
  out.has_squares = true;
  out.squares = ExactTerms(squares_gathered(squares));
}

void streaming_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

const CpuKernels* cpu_kernels_for(const char* isa) {
  if (std::strcmp(isa, "baseline") == 0) return &kCpuKernelsBaseline;
#if defined(PSCHED_CPU_KERNELS_X86)
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  if (std::strcmp(isa, "avx2") == 0)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? &kCpuKernelsAvx2 : nullptr;
  if (std::strcmp(isa, "avx512") == 0)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")
               ? &kCpuKernelsAvx512
               : nullptr;
#endif
  return nullptr;
}

const CpuKernels& cpu_kernels() {
  static const CpuKernels* const chosen = [] {
    const char* cap = std::getenv("PSCHED_CPU_KERNELS");
    for (const char* isa : {"avx512", "avx2", "baseline"}) {
      const CpuKernels* k = cpu_kernels_for(isa);
      if (k && (cap == nullptr || *cap == '\0' || std::strcmp(cap, isa) == 0)) return k;
      if (cap && std::strcmp(cap, isa) == 0) break;  // asked for a build this CPU cannot run
    }
    return &kCpuKernelsBaseline;
  }();
  return *chosen;
}

}  // namespace psched
