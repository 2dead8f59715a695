// End-to-end: the CPU path's speed work keeps its promises through the whole stack: every kernel
// build gives the same bits, and cheap chunks travel in wide windows without losing any.
#include <catch2/catch.hpp>

#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("a normal job gives the same bits on baseline and widest CPU kernels", "[e2e][cpu]") {
  pclient::Job job;  // the DeepOps benchmark's shape, small: normal(10, 1), (x + 1)[::2, ::2]
  job.rows = 700;
  job.cols = 900;
  job.chunk_rows = 128;
  job.chunk_cols = 301;  // odd widths: rows start on odd indices, so pairs straddle rows
  job.seed = 5;
  pclient::Result widest, baseline, fused;
  {
    TestCluster cluster;
    cluster.add_worker({.threads = 2});
    cluster.wait_for_workers(1);
    widest = cluster.client().run(job);
  }
  {
    TestCluster cluster;
    cluster.add_worker({.threads = 1, .env = {{"PSCHED_CPU_KERNELS", "baseline"}}});
    cluster.wait_for_workers(1);
    baseline = cluster.client().run(job);
    job.fused = true;
    fused = cluster.client().run(job);
  }
  CHECK(widest.sum == baseline.sum);  // bitwise: same double
  CHECK(widest.min == baseline.min);
  CHECK(widest.max == baseline.max);
  CHECK(widest.count == baseline.count);
  CHECK(fused.sum == baseline.sum);
  CHECK(fused.min == baseline.min);
}

TEST_CASE("fifty thousand one-element chunks on two workers are all counted once", "[e2e][cpu]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  // Workers announce a window of elements: cheap chunks are sent thousands at a time.
  for (const pclient::WorkerInfo& w : client.workers()) CHECK(w.slots >= 2);
  pclient::Job job = arange_job(5, 10000, 1, 1);
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  CHECK(r.chunks == 50000u);
  CHECK(r.retries == 0u);
  // Small and large chunks in turn on the same workers: the window follows the job.
  const pclient::Job big = arange_job(2000, 3000, 1000, 1500);
  CHECK(check(big, client.run(big)) == "");
  CHECK(check(job, client.run(job)) == "");
}
