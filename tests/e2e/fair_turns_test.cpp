// Fair turns: a small job submitted behind a huge one of another client gets its share of every
// worker at once (the window is shared by the part each job fills, and a worker's queue serves
// jobs in turn), instead of waiting for the huge job's queued chunks (it waited ~5 s).
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("a small job behind 2^24 one-element chunks of another client finishes within 50 ms", "[fair]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Job huge = arange_job(uint64_t{1} << 24, 1, 1, 1);
  huge.row_step = huge.col_step = 1;
  std::atomic<bool> running{false}, stop{false};
  std::string huge_error;
  std::thread big([&] {
    pclient::RunOptions options;
    options.on_progress = [&](const pclient::Progress& p) { running = running || p.chunks_done > 0; };
    options.should_cancel = [&] { return stop.load(); };
    try {
      cluster.client().run(huge, options);
    } catch (const pclient::Cancelled&) {
    } catch (const std::exception& e) {
      huge_error = e.what();
    }
  });
  REQUIRE(eventually([&] { return running.load(); }));
  pclient::Client client = cluster.client();
  const pclient::Job small = arange_job(100, 100, 10, 10);  // 100 chunks
  std::vector<double> seconds;
  for (int i = 0; i < 5; ++i) {
    const pclient::Result r = client.run(small);
    CHECK(check(small, r) == "");
    seconds.push_back(r.wall_seconds);
  }
  const bool huge_still_running = !stop.load() && running.load();
  stop = true;
  big.join();
  CHECK(huge_error == "");
  REQUIRE(huge_still_running);
  INFO("the small job's wall seconds, best of 5: " << *std::min_element(seconds.begin(), seconds.end()));
  CHECK(*std::min_element(seconds.begin(), seconds.end()) <= 0.050);
}
