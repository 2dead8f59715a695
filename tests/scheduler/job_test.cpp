#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>

#include "scheduler/job.h"

using namespace psched;

namespace {

std::shared_ptr<const JobSpec> spec_with_chunks(uint64_t rows) {
  JobSpec s;
  s.rows = rows;
  s.cols = 1;
  s.chunk_rows = 1;
  s.chunk_cols = 1;
  return std::make_shared<const JobSpec>(normalized(s));
}

// One chunk taken as dispatch takes its runs (Job::take_run, at most 1): its index.
uint64_t take_one(Job& job, WorkerId worker) {
  uint64_t first = 0;
  job.take_run(worker, 1, first);
  return first;
}

}  // namespace

TEST_CASE("chunks are handed out in index order, re-queued ones first", "[job]") {
  Job job(1, 1, spec_with_chunks(4), false);
  CHECK(take_one(job, 7) == 0);
  CHECK(take_one(job, 7) == 1);
  CHECK(job.requeue(0, 7, "w7", /*blame=*/false) == 0);
  CHECK(take_one(job, 8) == 0);
  CHECK(job.running_on(0) == 8);
  CHECK(take_one(job, 8) == 2);
  CHECK(job.retries() == 1);
}

TEST_CASE("a result counts once, and only from the worker running the chunk", "[job]") {
  Job job(1, 1, spec_with_chunks(2), false);
  const uint64_t c = take_one(job, 1);
  CHECK_FALSE(job.finish(c, 2, PartialSum{1, 1, 1, 1}));  // not its worker
  CHECK(job.finish(c, 1, PartialSum{1, 1, 1, 1}));
  CHECK_FALSE(job.finish(c, 1, PartialSum{1, 1, 1, 1}));  // duplicate
  CHECK(job.done() == 1);
  CHECK_FALSE(job.complete());
}

TEST_CASE("failures are counted per chunk with the workers named", "[job]") {
  Job job(1, 1, spec_with_chunks(1), false);
  take_one(job, 1);
  CHECK(job.requeue(0, 1, "alpha", true) == 1);
  take_one(job, 2);
  CHECK(job.requeue(0, 2, "beta", true) == 2);
  CHECK(job.failed_on(0) == std::vector<std::string>{"alpha", "beta"});
}

TEST_CASE("the result combines partials in chunk order whatever the completion order", "[job]") {
  auto run = [](bool reverse) {
    Job job(1, 1, spec_with_chunks(5), false);
    std::vector<uint64_t> chunks;
    for (int i = 0; i < 5; ++i) chunks.push_back(take_one(job, 1));
    if (reverse) std::reverse(chunks.begin(), chunks.end());
    const double values[5] = {1e16, 1.0, -1e16, 1.0, 3.0};
    for (uint64_t c : chunks) job.finish(c, 1, PartialSum{values[c], 1, values[c], values[c]});
    REQUIRE(job.complete());
    return job.result().sum;
  };
  CHECK(run(false) == run(true));
}

TEST_CASE("take_run hands out a run of fresh chunks, a requeued range first", "[job]") {
  Job job(1, 1, spec_with_chunks(10), false);
  uint64_t first = 99;
  CHECK(job.take_run(3, 4, first) == 4);
  CHECK(first == 0);
  CHECK(job.running_on(3) == 3);
  CHECK(job.requeue(2, 3, "w3", /*blame=*/false) == 0);
  CHECK(job.take_run(4, 5, first) == 1);  // the requeued chunk first, on its own
  CHECK(first == 2);
  CHECK(job.take_run(4, 100, first) == 6);  // the rest of the fresh chunks
  CHECK(first == 4);
  CHECK_FALSE(job.has_queued());
  CHECK(job.running_ranges_of(3) == std::vector<ChunkRange>{{0, 2}, {3, 1}});
  CHECK(job.running_ranges_of(4) == std::vector<ChunkRange>{{2, 1}, {4, 6}});
}

TEST_CASE("finish_adding: terms added in place give the same total as whole partials", "[job]") {
  // Two jobs of 4000 chunks, each chunk's exact sum 2^62 - 1 (two terms, a carry through two
  // digits): one takes whole partials, the other adds the terms in place, claiming 2^28 adds each
  // so that its total is normalised every four chunks; both must end with the same exact total
  // and figures, and a worker not running the chunk adds nothing.
  const uint64_t n = 4000;
  const double big = std::ldexp(1.0, 62), minus_one = -1.0;
  Job whole(1, 1, spec_with_chunks(n), false), in_place(2, 1, spec_with_chunks(n), false);
  for (uint64_t c = 0; c < n; ++c) {
    REQUIRE(take_one(whole, 1) == c);
    REQUIRE(take_one(in_place, 1) == c);
    PartialSum p;
    p.exact.add(big);
    p.exact.add(minus_one);
    p.sum = p.exact.rounded();
    p.count = 1;
    p.min = p.max = p.sum;
    REQUIRE(whole.finish(c, 1, p));
    CHECK_FALSE(in_place.finish_adding(ChunkRange{c, 1}, 2, ChunkFigures{p.sum, 1, p.sum, p.sum}, 2,
                                       [](ExactSum&) { FAIL("added for the wrong worker"); }));
    REQUIRE(in_place.finish_adding(ChunkRange{c, 1}, 1, ChunkFigures{p.sum, 1, p.sum, p.sum}, uint64_t{1} << 28,
                                   [&](ExactSum& total) {
                                     total.add(big);
                                     total.add(minus_one);
                                   }));
  }
  CHECK(in_place.complete());
  CHECK(same_bits(expand(whole.result()), expand(in_place.result())));
  ExactSum want;
  for (uint64_t c = 0; c < n; ++c) {
    want.add(big);
    want.add(minus_one);
    if (c % 1000 == 999) want.normalize();
  }
  CHECK(same_value(in_place.result().exact.value(), want));
}

namespace {

// Runs a job's suspects, each alone on a fresh worker, until the failure limit (3) is reached: a
// run holding `culprit` takes its worker down (halved while long, blamed when it is one chunk),
// others complete. Returns the crashes; `at_limit` gets what reached the limit.
int run_suspects(Job& job, uint64_t culprit, std::vector<ChunkRange>& at_limit) {
  WorkerId w = 100;
  int crashes = 0;
  while (job.has_suspects() && at_limit.empty()) {
    const ChunkRange r = job.take_suspect(++w);
    CHECK((r.count == 1 || r.count > Job::kSuspectsOneByOne));
    if (culprit < r.first || culprit >= r.end()) {
      CHECK(job.finish(r, w, PartialSum{1, r.count, 1, 1}));
      continue;
    }
    ++crashes;
    const std::string name = fmt::format("w{}", w);
    if (!job.requeue_halves(r, w, name)) CHECK(job.requeue(r, w, name, true, false, 3, &at_limit));
  }
  return crashes;
}

// A job whose chunks 0..n-1 all ran on worker 5 ("five"), then on worker 6 ("six"), both of which
// died; chunks 0 and 1 finished on 6 first. The rest go back as one suspect range.
void lost_twice(Job& job, uint64_t n) {
  uint64_t first = 99;
  CHECK(job.take_run(5, n, first) == n);
  // A first loss: blamed (one range, not one record per chunk), back as one ordinary range.
  CHECK(job.requeue(ChunkRange{0, n}, 5, "five", /*blame=*/true, /*repeat_as_suspect=*/true));
  CHECK_FALSE(job.has_suspects());
  CHECK(job.failed_on(n - 1) == std::vector<std::string>{"five"});
  CHECK(job.take_run(6, n, first) == n);
  CHECK_FALSE(job.requeue(ChunkRange{0, n}, 5, "five", true, true));  // not running there: nothing
  CHECK(job.finish(ChunkRange{0, 2}, 6, PartialSum{1, 2, 1, 1}));
  std::vector<ChunkRange> at_limit;
  CHECK(job.requeue(ChunkRange{2, n - 2}, 6, "six", true, true, /*limit=*/3, &at_limit));
  CHECK(at_limit.empty());
  CHECK(job.failed_on(2) == std::vector<std::string>{"five", "six"});
  CHECK(job.failed_on(0) == std::vector<std::string>{"five"});
  CHECK_FALSE(job.has_ordinary());
  CHECK(job.has_suspects());
  CHECK(job.queued() == n - 2);
}

}  // namespace

TEST_CASE("a suspect range goes back apart from the ordinary chunks and runs chunk by chunk", "[job]") {
  const uint64_t n = 300, culprit = 7;
  Job job(1, 1, spec_with_chunks(n), false);
  lost_twice(job, n);
  // Innocent neighbours complete alone; the culprit, alone, takes a third worker down.
  std::vector<ChunkRange> at_limit;
  CHECK(run_suspects(job, culprit, at_limit) == 1);
  CHECK(at_limit == std::vector<ChunkRange>{{culprit, 1}});
  CHECK(job.failed_on(culprit) == std::vector<std::string>{"five", "six", "w106"});
  CHECK(job.failures(culprit) == 3);
  CHECK(job.failed_on(culprit - 1) == std::vector<std::string>{"five", "six"});
  CHECK(job.ranges().state(culprit - 1) == ChunkState::kDone);
  CHECK(job.has_ordinary());  // a chunk requeued after running alone is an ordinary one again
}

TEST_CASE("a suspect range longer than a plain window runs whole and is halved each time it crashes", "[job]") {
  // A GPU's deep timed window lost twice: 299998 suspects. Run one by one, that is 299998 lone
  // round trips; halved, the culprit's piece is short enough after 3 crashes.
  const uint64_t n = 300000, culprit = 7;
  Job job(1, 1, spec_with_chunks(n), false);
  lost_twice(job, n);
  std::vector<ChunkRange> at_limit;
  CHECK(run_suspects(job, culprit, at_limit) == 4);  // 299998, 149999, 74999 chunks; then 7 alone
  CHECK(at_limit == std::vector<ChunkRange>{{culprit, 1}});
  // The failure names every worker the culprit took down, but only the lone crash and the two
  // window losses count against the limit, so halving never fails the job on an innocent chunk.
  CHECK(job.failed_on(culprit).size() == 6);
  CHECK(job.failures(culprit) == 3);
  CHECK(job.failures(culprit + 1) == 2);
  CHECK(job.failures(n - 1) == 2);
  CHECK(job.ranges().state(n - 1) == ChunkState::kDone);
  CHECK(job.ranges().state(culprit) == ChunkState::kQueued);
}

TEST_CASE("a lost worker's chunks are named but count only when it ran nothing else", "[job]") {
  const uint64_t n = 10;
  Job job(1, 1, spec_with_chunks(n), false);
  std::vector<ChunkRange> at_limit;
  uint64_t first = 99;
  // Two workers killed from outside, each with the whole window: named, nothing counted.
  CHECK(job.take_run(5, n, first) == n);
  CHECK(job.requeue_lost(ChunkRange{0, n}, 5, "five", "connection closed", /*alone=*/false, 3, at_limit));
  CHECK(job.failures(3) == 0);
  CHECK(job.failed_on(3) == std::vector<std::string>{"five"});
  CHECK_FALSE(job.has_suspects());
  CHECK(job.take_run(6, n, first) == n);
  CHECK(job.requeue_lost(ChunkRange{0, n}, 6, "six", "no heartbeat for 2 s", false, 3, at_limit));
  CHECK(job.failures(3) == 0);
  CHECK(job.has_suspects());  // lost twice: to run alone
  CHECK(at_limit.empty());
  // Alone, chunk 0 takes three workers down: that is shown, and each loss is told.
  WorkerId w = 100;
  while (at_limit.empty() && job.has_suspects()) {
    const ChunkRange r = job.take_suspect(++w);
    REQUIRE(r.count == 1);
    if (r.first != 0) {
      CHECK(job.finish(r, w, PartialSum{1, 1, 1, 1}));
      continue;
    }
    CHECK(job.requeue_lost(r, w, fmt::format("w{}", w), "killed", /*alone=*/true, 3, at_limit));
  }
  CHECK(at_limit == std::vector<ChunkRange>{{0, 1}});
  CHECK(job.failures(0) == 3);
  CHECK(job.shown_failures(0) == std::vector<std::string>{"w101 (killed)", "w111 (killed)", "w112 (killed)"});
  CHECK(job.failed_on(0).size() == 5);
  CHECK(job.done() == n - 1);
}
