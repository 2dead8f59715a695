// Admission decisions, without a process: a client's share of the chunk budget and the budget as a
// whole, each refusal naming the limit it would pass.
#include <catch2/catch.hpp>

#include "scheduler/admission.h"
#include "scheduler/scheduler.h"

using namespace psched;

TEST_CASE("a client is refused past its share while others still fit in the budget", "[admission]") {
  const AdmissionLimits limits{.max_chunks = 4000, .max_client_chunks = 1000};
  CHECK(admit_job(1000, {.client_chunks = 0, .all_chunks = 0}, limits));
  const Status greedy = admit_job(1, {.client_chunks = 1000, .client_jobs = 1, .all_chunks = 1000, .all_jobs = 1},
                                  limits);
  CHECK(greedy.message() == "client limit: your 1 running jobs hold 1000 chunks; this job's 1 more would pass "
                            "one client's share of 1000 (submit it when some finish)");
  // Another client, while the greedy one sits at its limit: taken.
  CHECK(admit_job(1000, {.client_chunks = 0, .all_chunks = 1000, .all_jobs = 1}, limits));
  const Status busy = admit_job(1000, {.client_chunks = 0, .all_chunks = 3500, .all_jobs = 4}, limits);
  CHECK(busy.message().rfind("scheduler busy: 4 running jobs hold 3500 chunks", 0) == 0);
}

TEST_CASE("the default share lets four clients hold the largest job each", "[admission]") {
  const AdmissionLimits limits;
  CHECK(limits.max_client_chunks == kMaxChunks);
  CHECK(limits.max_chunks == 4 * kMaxChunks);
}

TEST_CASE("the heartbeat is at most a fifth of the worker timeout, and at least 50 ms", "[admission]") {
  CHECK(heartbeat_ms_for(30000, 1000) == 1000);
  CHECK(heartbeat_ms_for(1000, 1000) == 200);
  CHECK(heartbeat_ms_for(100, 1000) == 50);
}
