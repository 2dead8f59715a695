// End-to-end: real psched + pcuda-worker processes on loopback, jobs through libpclient.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <thread>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("arange sums are exact for several shapes, chunkings and steps on 1 to 3 workers", "[e2e]") {
  for (int workers = 1; workers <= 3; ++workers) {
    TestCluster cluster;
    for (int i = 0; i < workers; ++i) cluster.add_worker({.threads = 1});
    cluster.wait_for_workers(size_t(workers));
    pclient::Client client = cluster.client();
    const std::vector<pclient::Job> jobs = {
        arange_job(100, 100, 10, 10),
        arange_job(97, 131, 10, 16, 2, 3),   // ragged edges, steps not dividing chunks
        arange_job(1, 5000, 1, 333, 1, 7),   // 1-D
        arange_job(300, 7, 64, 7, 5, 1),
    };
    for (const auto& job : jobs) {
      const pclient::Result r = client.run(job);
      INFO("workers " << workers << " rows " << job.rows << " cols " << job.cols);
      CHECK(check(job, r) == "");
      CHECK(r.chunks == job.chunks());
      CHECK(r.workers >= 1);
    }
    pclient::Job window = arange_job(40, 50, 7, 9);
    window.row_start = 3;
    window.row_stop = 38;
    window.col_start = 5;
    window.col_stop = 6;
    window.scale = 3;
    window.offset = -2;
    CHECK(check(window, client.run(window)) == "");
  }
}

TEST_CASE("the DeepOps benchmark at a small size has mean 11 within 1e-3", "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Job deepops;  // normal(10, 1), (x + 1)[::2, ::2]
  // 16e6 selected elements: the standard error of the mean is 2.5e-4, so 1e-3 is a 4-sigma bound.
  deepops.rows = deepops.cols = 8000;
  deepops.chunk_rows = deepops.chunk_cols = 1000;
  const pclient::Result r = cluster.client().run(deepops);
  CHECK(r.count == 4000u * 4000u);
  CHECK(std::fabs(r.mean() - 11.0) < 1e-3);
  CHECK(r.workers == 2);
}

TEST_CASE("the same job gives the same bits on 1 and 3 workers", "[e2e]") {
  pclient::Job job;
  job.rows = job.cols = 1200;
  job.chunk_rows = 100;
  job.chunk_cols = 150;
  job.seed = 77;
  pclient::Result one, three;
  {
    TestCluster cluster;
    cluster.add_worker({.threads = 1});
    cluster.wait_for_workers(1);
    one = cluster.client().run(job);
  }
  {
    TestCluster cluster;
    for (int i = 0; i < 3; ++i) cluster.add_worker({.threads = 2});
    cluster.wait_for_workers(3);
    three = cluster.client().run(job);
  }
  CHECK(one.sum == three.sum);  // bitwise: same double
  CHECK(one.count == three.count);
  CHECK(one.min == three.min);
  CHECK(one.max == three.max);
}

TEST_CASE("two clients submitting at once both get exact results", "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  const pclient::Job a = arange_job(400, 400, 20, 20);
  const pclient::Job b = arange_job(300, 500, 30, 25, 3, 2);
  pclient::Result ra, rb;
  std::string error;
  std::thread other([&] {
    try {
      rb = cluster.client().run(b);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  ra = cluster.client().run(a);
  other.join();
  CHECK(error == "");
  CHECK(check(a, ra) == "");
  CHECK(check(b, rb) == "");
}

TEST_CASE("progress is streamed and partials add up to the result", "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  const pclient::Job job = arange_job(200, 200, 10, 10);
  std::vector<pclient::ChunkPartial> partials;
  uint64_t last_done = 0;
  pclient::RunOptions options;
  options.want_partials = true;
  options.on_progress = [&](const pclient::Progress& p) {
    CHECK(p.chunks_done >= last_done);
    last_done = p.chunks_done;
    partials.insert(partials.end(), p.partials.begin(), p.partials.end());
  };
  const pclient::Result r = cluster.client().run(job, options);
  CHECK(last_done == job.chunks());
  REQUIRE(partials.size() == job.chunks());
  double sum = 0;
  uint64_t count = 0;
  for (const auto& p : partials) {
    sum += p.sum;
    count += p.count;
  }
  CHECK(count == r.count);
  CHECK(sum == r.sum);  // integers below 2^53: exact in any order
}

TEST_CASE("partials of many fast chunks come split over several Progress messages", "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  const pclient::Job job = arange_job(1, 400000, 1, 1);  // 400,000 one-element chunks
  uint64_t received = 0, messages = 0;
  size_t largest = 0;
  double sum = 0;
  pclient::RunOptions options;
  options.want_partials = true;
  options.on_progress = [&](const pclient::Progress& p) {
    ++messages;
    largest = std::max(largest, p.partials.size());
    received += p.partials.size();
    for (const auto& c : p.partials) sum += c.sum;
  };
  const pclient::Result r = cluster.client().run(job, options);
  CHECK(check(job, r) == "");
  CHECK(received == job.chunks());
  CHECK(sum == r.sum);  // integers below 2^53: exact in any order
  CHECK(largest <= 4096);  // kMaxPartialsPerProgress (scheduler/scheduler.h)
  CHECK(messages >= job.chunks() / 4096);
}

TEST_CASE("an invalid job is refused by the scheduler with a clear error and the cluster keeps serving",
          "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(1);
  pclient::Client client = cluster.client();
  pclient::Job bad = arange_job(10, 10, 0, 5);
  CHECK_THROWS_WITH(client.run(bad), Catch::Contains("chunk-x must be > 0"));
  const pclient::Job good = arange_job(50, 50, 10, 10);
  CHECK(check(good, client.run(good)) == "");
}

TEST_CASE("cluster info lists each worker with its backend and threads", "[e2e]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 2, .name = "alpha"});
  cluster.add_worker({.threads = 1, .name = "beta"});
  cluster.wait_for_workers(2);
  auto workers = cluster.client().workers();
  REQUIRE(workers.size() == 2);
  std::sort(workers.begin(), workers.end(), [](auto& a, auto& b) { return a.name < b.name; });
  CHECK(workers[0].name == "alpha");
  CHECK(workers[0].backend == "cpu");
  CHECK(workers[0].threads == 2);
  CHECK(workers[1].name == "beta");
  CHECK(workers[1].slots == 2);
}
