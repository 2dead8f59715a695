// local_cluster_children (client/local_cluster_children.h): the processes pbench -g N / -c N and
// Python's LocalCluster start; here, each GPU worker's share of the host's readers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <thread>

#include "client/local_cluster_children.h"
#include "core/reader_share.h"

using namespace pclient;

namespace {

// The value after `flag` in a child's arguments ("" when it has none).
std::string arg_after(const LocalChild& child, const std::string& flag) {
  const auto it = std::find(child.args.begin(), child.args.end(), flag);
  return it == child.args.end() || it + 1 == child.args.end() ? "" : *(it + 1);
}

}  // namespace

TEST_CASE("readers_per_gpu: one per core of a GPU share of the host (4 to 32)") {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned gpus : {1u, 2u, 3u, 4u, 8u, 64u, 10000u}) {
    const unsigned r = psched::readers_per_gpu(gpus);
    CHECK(r >= 4);
    CHECK(r <= 32);
    CHECK(r == std::clamp(cores / gpus, 4u, 32u));
    CHECK(r <= psched::readers_per_gpu(1));
  }
  CHECK(psched::readers_per_gpu(10000) == 4);
  CHECK(psched::readers_per_gpu(0) == psched::readers_per_gpu(1));
  // Half the host's memory, shared: N workers' limits add up to one worker's.
  CHECK(psched::register_limit_per_gpu(1) > 0);
  CHECK(psched::register_limit_per_gpu(0) == psched::register_limit_per_gpu(1));
  CHECK(psched::register_limit_per_gpu(1) - 4 * psched::register_limit_per_gpu(4) < 4);
}

TEST_CASE("local_cluster_children: GPU workers get their share of the readers and registered pages, CPU workers none") {
  for (int n : {1, 2, 4, 7}) {
    LocalClusterOptions o;
    o.gpu_workers = n;
    const auto children = local_cluster_children(o, "/tmp/s.json");
    REQUIRE(children.size() == size_t(n) + 1);
    CHECK(children[0].binary == "psched");
    for (int i = 1; i <= n; ++i) {
      INFO("GPU worker " << i << " of " << n);
      CHECK(arg_after(children[size_t(i)], "--backend") == "cuda");
      CHECK(arg_after(children[size_t(i)], "--readers") == std::to_string(psched::readers_per_gpu(unsigned(n))));
      CHECK(arg_after(children[size_t(i)], "--register-limit") ==
            std::to_string(psched::register_limit_per_gpu(unsigned(n))));
    }
  }
  LocalClusterOptions cpu;
  cpu.cpu_workers = 3;
  for (const LocalChild& w : local_cluster_children(cpu, "/tmp/s.json")) {
    CHECK(arg_after(w, "--readers").empty());
    CHECK(arg_after(w, "--register-limit").empty());
  }
}
