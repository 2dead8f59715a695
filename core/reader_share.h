// How many chunks of a stored array a GPU worker reads at once by default: one reader per core of
// its share of the host (the host's cores / the GPU workers on it), 4 to 32. pcuda-worker's
// --readers default is this for one GPU; pbench -g N, Python's LocalCluster and pcuda-worker
// --gpus give each of their N workers its share, so that N readers per core do not compete for
// the host's memory bandwidth (bench/README.md, "Several GPUs reading one file").
// Likewise the pages of stored files a GPU worker may register with CUDA at once (pcuda-worker
// --register-limit, worker/cuda/registered_files.h): half the host's memory shared by its GPU
// workers, so that N workers reading N files cannot pin more than half of it between them.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <thread>

namespace psched {

inline unsigned readers_per_gpu(unsigned gpus_on_host) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp(cores / std::max(1u, gpus_on_host), 4u, 32u);
}

// The host's physical memory; 0 where the system does not say.
inline uint64_t host_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

inline uint64_t register_limit_per_gpu(unsigned gpus_on_host) {
  return host_memory_bytes() / 2 / std::max(1u, gpus_on_host);
}

}  // namespace psched
