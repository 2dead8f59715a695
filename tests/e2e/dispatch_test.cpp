// Dispatch's window and tail rules with real daemons: small chunks travel in wide windows, yet a
// small job, and the end of a big one, spread over every worker instead of queueing in one window.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>

#include "dashboard/http_probe.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

using namespace psched::test;

TEST_CASE("a small job of small chunks spreads over every worker, not one wide window", "[e2e][dispatch]") {
  TestCluster cluster;
  for (int i = 0; i < 3; ++i) cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(3);
  pclient::Client client = cluster.client();
  // 36 chunks of 10,000 elements: a one-thread CPU worker's window (2^18 elements: 26 of these
  // chunks) took 26 and left the third worker nothing; each part is now at least one slot's worth
  // (2^17 elements: 14 chunks), so the parts are 14, 14 and 8. (On a loaded machine the tail split
  // may then move a few chunks between workers, so the parts are not checked exactly.)
  const pclient::Job job = arange_job(600, 600, 100, 100);
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  CHECK(r.chunks == 36u);
  CHECK(r.workers == 3u);
  uint64_t least = UINT64_MAX;
  for (const pclient::WorkerInfo& w : client.workers()) least = std::min(least, w.chunks_done);
  CHECK(least >= 1u);
}

TEST_CASE("a tiny job is not cut into parts: it stays on one worker", "[e2e][dispatch]") {
  TestCluster cluster({.dashboard = "127.0.0.1:0"});
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  const pclient::Job job = arange_job(1, 1000, 1, 100);  // 10 chunks, 1000 elements in all
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  // One part, on one worker. Only a tail split may move chunks to the other (the idle worker asks
  // for the back half of a share after 1 ms: on an overloaded machine the tiny job can take
  // that long), and /metrics counts what it gave back.
  const HttpReply metrics = http_request(port_of(cluster.dashboard()), "GET", "/metrics");
  REQUIRE(metrics.body.find("\npsched_tasks_total{state=\"given_back\"} ") != std::string::npos);
  const bool split = metrics.body.find("\npsched_tasks_total{state=\"given_back\"} 0\n") == std::string::npos;
  INFO(metrics.body);
  CHECK((r.workers == 1u || split));
}

TEST_CASE("a big job of one-element chunks keeps every worker busy to the end and is exact", "[e2e][dispatch]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1});
  cluster.add_worker({.threads = 1});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  const pclient::Job job = arange_job(400, 500, 1, 1);  // 200,000 chunks
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  CHECK(r.chunks == 200000u);
  CHECK(r.workers == 2u);
  // Both workers' shares are within a window of each other: neither sat idle while the other
  // worked off a queue.
  const auto workers = client.workers();
  REQUIRE(workers.size() == 2);
  const uint64_t a = workers[0].chunks_done, b = workers[1].chunks_done;
  INFO("the workers' shares: " << a << " and " << b);
  CHECK(a + b == 200000u);
  CHECK(std::min(a, b) >= 40000u);
}

TEST_CASE("a slow worker gives back the tail of its window to an idle one: the job does not wait for it",
          "[e2e][dispatch]") {
  TestCluster cluster;
  cluster.add_worker({.threads = 1, .name = "fast"});
  cluster.add_worker({.threads = 1, .name = "slow", .env = {{"PSCHED_TEST_CHUNK_DELAY_MS", "40"}}});
  cluster.wait_for_workers(2);
  pclient::Client client = cluster.client();
  // 400 chunks of 10,000 elements; each worker's window holds 26 of them. The fast worker does
  // everything else in milliseconds while the slow one (40 ms a chunk) has done one; once its speed
  // is known, it is asked for the back half of what it holds, again and again, and gives back what
  // it has not started. Without that it would compute all 26, for a second after the fast one
  // went idle.
  const pclient::Job job = arange_job(2000, 2000, 100, 100);
  const pclient::Result r = client.run(job);
  CHECK(check(job, r) == "");
  CHECK(r.retries == 0u);  // given back unstarted: not a retry
  uint64_t slow = 0, fast = 0;
  for (const pclient::WorkerInfo& w : client.workers()) (w.name == "slow" ? slow : fast) += w.chunks_done;
  CHECK(slow + fast == 400u);
  CHECK(slow <= 13u);  // at most half its window: ~4 here (each halving waits for one of its reports)
}
