// Admission decisions, without a process: a client's share of the job budget and the budget as a
// whole, each refusal naming the limit it would pass.
#include <catch2/catch.hpp>

#include "scheduler/admission.h"
#include "scheduler/scheduler.h"

using namespace psched;

TEST_CASE("a client is refused past its share of jobs while others still fit, each refusal naming its option",
          "[admission]") {
  const AdmissionLimits limits{.max_jobs = 4, .max_client_jobs = 2};
  CHECK(admit_job(0, 0, limits));
  CHECK(admit_job(1, 1, limits));
  const Status greedy = admit_job(2, 2, limits);
  CHECK(greedy.message() == "client limit: you have 2 running jobs, one client's most (psched "
                            "--max-client-jobs 2); submit it when one finishes");
  // Another client, while the greedy one sits at its limit: taken.
  CHECK(admit_job(0, 2, limits));
  const Status busy = admit_job(1, 4, limits);
  CHECK(busy.message() == "scheduler busy: 4 running jobs, the most it holds (psched --max-jobs 4); "
                          "submit it when some finish");
}

TEST_CASE("the default share lets four clients hold the most jobs each", "[admission]") {
  const AdmissionLimits limits;
  CHECK(limits.max_jobs == 4 * limits.max_client_jobs);
  CHECK(limits.max_client_jobs >= 10000);  // 100 clients x 100 jobs fit with room
}

TEST_CASE("the heartbeat is at most a fifth of the worker timeout, and at least 50 ms", "[admission]") {
  CHECK(heartbeat_ms_for(30000, 1000) == 1000);
  CHECK(heartbeat_ms_for(1000, 1000) == 200);
  CHECK(heartbeat_ms_for(100, 1000) == 50);
}
