// How many chunks of a stored array a GPU worker reads at once by default: one reader per core of
// its share of the host (the host's cores / the GPU workers on it), 4 to 32. pcuda-worker's
// --readers default is this for one GPU; pbench -g N, Python's LocalCluster and pcuda-worker
// --gpus give each of their N workers its share, so that N readers per core do not compete for
// the host's memory bandwidth (bench/README.md, "Several GPUs reading one file").
#pragma once

#include <algorithm>
#include <thread>

namespace psched {

inline unsigned readers_per_gpu(unsigned gpus_on_host) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(cores / std::max(1u, gpus_on_host), 4u, 32u);
}

}  // namespace psched
