// The element at a global linear index by generator kind fixed at compile time, for generate.cu
// (which writes chunks) and reduce.cu (which generates a fused chunk's selection on the spot).
// Kernel syntax: nvcc only.
#pragma once

#include <cstdint>

#include "core/generators.h"
#include "worker/cuda/fast_generators.h"
#include "worker/cuda/kernels.cuh"

namespace psched::gpu {

// The element at a global linear index, with the generator kind fixed at compile time.
template <Generator Kind, ElementFormula Formula>
__device__ __forceinline__ double generated(const KeyedGenerator& g, uint64_t index) {
  if constexpr (Formula == ElementFormula::kFast) {
    return element_value_fast<Kind>(g, index);
  } else {
    GeneratorParams fixed = g;
    fixed.kind = Kind;
    return element_value(fixed, index);
  }
}

// PSCHED_FEW_DEFERRED_PLACES (CMake option, for the GPU tests only): so few deferred places that
// most blocks run out of them and take the fallbacks below.
#ifdef PSCHED_FEW_DEFERRED_PLACES
constexpr bool kFewDeferredPlaces = true;
#else
constexpr bool kFewDeferredPlaces = false;
#endif

// Elements a block leaves to its end: those whose normal the ziggurat's fast path could not finish
// (about 0.7 %). A thread records the element's place (32 bits: a chunk's offset, or a selection's
// position, both below 2^31) with one shared atomic and goes on; once every thread is done, the
// block computes the recorded ones together, a full warp at a time. Run in place, a slow path
// (some 250 instructions: Philox again, log, a loop) held up the other 31 lanes of its warp, and a
// warp of 32 meets one in about a fifth of its element slots: a 10000² chunk took 0.624 ms that
// way against 0.453 for the Box-Muller it replaced, 0.430 deferred (one H200). kCapacity places a
// block; past them the element is still made, by the slow path in place (same bits, just slower;
// the GPU tests pass built with 16 places, PSCHED_FEW_DEFERRED_PLACES, which sends many elements
// that way).
struct DeferredElements {
  static constexpr uint32_t kCapacity = kFewDeferredPlaces ? 16 : 2048;
  uint32_t count;
  uint32_t place[kCapacity];

  // Before any defer(): one thread clears count, then the block syncs.
  __device__ void start(uint32_t thread) {
    if (thread == 0) count = 0;
  }
  // Records place; false when full (the caller finishes the element itself).
  __device__ bool defer(uint32_t where) {
    const uint32_t slot = atomicAdd(&count, 1u);
    if (slot >= kCapacity) return false;
    place[slot] = where;
    return true;
  }
  // After the block syncs: how many places were recorded, and the k-th.
  __device__ uint32_t recorded() const { return count < kCapacity ? count : kCapacity; }
  __device__ uint32_t at(uint32_t k) const { return place[k]; }
};

// The same places in a list per warp, for a block of 256 threads (8 warps): a warp records and
// finishes its own with __syncwarp alone, while the block's other warps run on (the generate
// kernel's float64 blocks finish every few passes over their rows, where a block-wide list held
// every warp at a barrier each time: generate_normal_pairs_kernel, generate.cu).
struct WarpDeferredElements {
  static constexpr uint32_t kWarps = 8;
  static constexpr uint32_t kCapacity = kFewDeferredPlaces ? 2 : 128;  // places a warp
  uint32_t count[kWarps];
  uint32_t place[kWarps][kCapacity];
};

// One warp's list of a WarpDeferredElements: DeferredElements' calls, synchronised by __syncwarp.
struct WarpDeferred {
  WarpDeferredElements& lists;
  uint32_t warp;
  // Before any defer(): lane 0 clears the count, then the warp syncs.
  __device__ void start(uint32_t lane) {
    if (lane == 0) lists.count[warp] = 0;
  }
  __device__ bool defer(uint32_t where) {
    const uint32_t slot = atomicAdd(&lists.count[warp], 1u);
    if (slot >= WarpDeferredElements::kCapacity) return false;
    lists.place[warp][slot] = where;
    return true;
  }
  // After the warp syncs.
  __device__ uint32_t recorded() const {
    return lists.count[warp] < WarpDeferredElements::kCapacity ? lists.count[warp] : WarpDeferredElements::kCapacity;
  }
  __device__ uint32_t at(uint32_t k) const { return lists.place[warp][k]; }
};

}  // namespace psched::gpu
