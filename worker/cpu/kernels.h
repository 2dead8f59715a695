// The CPU backend's two hot loops, vectorised: generate a run of array elements, and reduce a
// strided run of stored elements into eight lane accumulators. One source (kernels_impl.h) is
// compiled three times (baseline x86-64, AVX2 with FMA, AVX-512) and the widest the CPU supports
// is picked at run time, so the binary still runs on any x86-64. Every build performs the same IEEE
// operations on every element and sums them exactly, so an element and a chunk's partial have the
// same bits on every machine whichever build runs.
//
// Every generator is bit-identical to element_value() (core/generators.h): normal's log, sin and
// cos are core/element_math.h's, the same operations on vector lanes (tests/worker/kernels_test.cpp).
#pragma once

#include <cstdint>

#include "core/exact_sum.h"
#include "core/generators.h"
#include "core/partial.h"

namespace psched {

// Eight lanes of sums, minima and maxima: element j of a reduced run goes to lane j % 8. Each lane's
// sum is a two-term expansion hi + lo kept error-free with TwoSum; what it cannot hold (a nonzero
// error of lo's own addition: rare, only across a wide range of magnitudes), NaNs, infinities and
// elements that would overflow a lane go into `exact`, so hi + lo + exact is the exact sum of the
// elements. Any order gives the same total, so every build
// agrees bit for bit.
struct ReduceLanes {
  double hi[8];
  double lo[8];
  double min[8];
  double max[8];
  ExactSum exact;
  uint64_t spills;  // adds into `exact` since it was last normalised
  // Runs whose lo additions were left plain and proven exact afterwards (reduce_impl.h,
  // optimistic_registers), and how many runs still go the exact way after one that was not.
  uint64_t optimistic_runs;
  uint32_t optimism_rest;
  // log2 of a power of two that every lane's hi and lo are whole multiples of, as the last run
  // that proved its adds left them (the next run's proof starts from it): kQuantumNone while
  // every lane is zero, kQuantumUnknown after a run that went the exact way.
  int32_t quantum;
};
inline constexpr int32_t kQuantumNone = 2000;
inline constexpr int32_t kQuantumUnknown = -2000;

// A var/std job's squares, each split exactly as h + l (h = v*v, l = fma(v, v, -h)): the h go into
// `high`, the l into `low`. Two expansions, not one: l is some 2^-52 of h, and one lane holding
// both would need more than 106 bits and spill on almost every register.
struct SquareLanes {
  ReduceLanes high, low;
};

void lanes_init(ReduceLanes& lanes);
// Adds x exactly into lanes.exact (out of line: the kernels' rare path; it keeps the digits within
// their headroom).
void lanes_spill(ReduceLanes& lanes, double x);
// The partial of everything reduced into the lanes (count left to the caller): the lanes' exact
// total and its rounding, min and max over all lanes; as a CompactPartial, the exact total split
// into its terms once, without the accumulator copied out (the backend's per-chunk path).
void lanes_total(ReduceLanes& lanes, PartialSum& out);
void lanes_total(ReduceLanes& lanes, CompactPartial& out);
// The exact sum of everything reduce_squares() put into `squares`, as out.squares.
void lanes_squares_total(SquareLanes& squares, PartialSum& out);
void lanes_squares_total(SquareLanes& squares, CompactPartial& out);

struct CpuKernels {
  const char* isa;  // "baseline", "avx2" or "avx512"
  // out[i] = element_value(g, first + i * stride) for i < n, rounded through float when
  // to_float (a float32 array's stored value, widened back). streaming: store around the caches
  // (non-temporal stores where out is aligned) for buffers far larger than them, which are read
  // back from memory anyway; it saves reading every line in before writing it. Same values. Call
  // streaming_fence() once the buffer is written (not after every call: a fence waits for the
  // stores to drain).
  void (*generate)(const GeneratorParams& g, bool to_float, uint64_t first, uint64_t stride,
                   uint64_t n, double* out, bool streaming);
  // For j < n: v = scale * x[j * step] + offset (multiply, then add, each rounded) goes to lane
  // j % 8 of `lanes`, exactly.
  void (*reduce)(const double* x, uint64_t step, uint64_t n, double scale, double offset,
                 ReduceLanes& lanes);
  // reduce(), and in the same pass each v's square, split exactly as v*v + fma(v, v, -v*v), into
  // `squares` (their min and max mean nothing): a var/std job's loop (JobSpec::squares).
  void (*reduce_squares)(const double* x, uint64_t step, uint64_t n, double scale, double offset,
                         ReduceLanes& lanes, SquareLanes& squares);
  // For i < n: the standard normal of word words[i] as the normal generator computes it for element
  // index[i] of seed (ziggurat() in core/generators.h), so tests can feed the words that take each
  // of its paths (fast, wedge, tail, the top layer), which Philox draws rarely.
  void (*ziggurat)(uint64_t seed, const uint64_t* index, const uint64_t* words, uint64_t n, double* out);
};

// Orders this thread's non-temporal stores before what follows (sfence); a no-op elsewhere.
void streaming_fence();

// The widest build this CPU runs (PSCHED_CPU_KERNELS=baseline|avx2|avx512 narrows the choice).
const CpuKernels& cpu_kernels();
// A named build, or nullptr when this CPU cannot run it (tests compare the builds).
const CpuKernels* cpu_kernels_for(const char* isa);

}  // namespace psched
