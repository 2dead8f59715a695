#include <catch2/catch.hpp>

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

}  // namespace

TEST_CASE("chunks are handed out in index order, re-queued ones first", "[job]") {
  Job job(1, 1, spec_with_chunks(4), false);
  CHECK(job.take(7) == 0);
  CHECK(job.take(7) == 1);
  CHECK(job.requeue(0, 7, "w7", /*blame=*/false) == 0);
  CHECK(job.take(8) == 0);
  CHECK(job.running_on(0) == 8);
  CHECK(job.take(8) == 2);
  CHECK(job.retries() == 1);
}

TEST_CASE("a result counts once, and only from the worker running the chunk", "[job]") {
  Job job(1, 1, spec_with_chunks(2), false);
  const uint64_t c = job.take(1);
  CHECK_FALSE(job.finish(c, 2, PartialSum{1, 1, 1, 1}));  // not its worker
  CHECK(job.finish(c, 1, PartialSum{1, 1, 1, 1}));
  CHECK_FALSE(job.finish(c, 1, PartialSum{1, 1, 1, 1}));  // duplicate
  CHECK(job.done() == 1);
  CHECK_FALSE(job.complete());
}

TEST_CASE("failures are counted per chunk with the workers named", "[job]") {
  Job job(1, 1, spec_with_chunks(1), false);
  job.take(1);
  CHECK(job.requeue(0, 1, "alpha", true) == 1);
  job.take(2);
  CHECK(job.requeue(0, 2, "beta", true) == 2);
  CHECK(job.failed_on(0) == std::vector<std::string>{"alpha", "beta"});
}

TEST_CASE("the result combines partials in chunk order whatever the completion order", "[job]") {
  auto run = [](bool reverse) {
    Job job(1, 1, spec_with_chunks(5), false);
    std::vector<uint64_t> chunks;
    for (int i = 0; i < 5; ++i) chunks.push_back(job.take(1));
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
    REQUIRE(whole.take(1) == c);
    REQUIRE(in_place.take(1) == c);
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
  CHECK(same_bits(whole.result(), in_place.result()));
  ExactSum want;
  for (uint64_t c = 0; c < n; ++c) {
    want.add(big);
    want.add(minus_one);
    if (c % 1000 == 999) want.normalize();
  }
  CHECK(same_value(in_place.result().exact, want));
}

TEST_CASE("a suspect goes back apart from the ordinary chunks and comes out only by take_suspect", "[job]") {
  Job job(1, 1, spec_with_chunks(3), false);
  uint64_t first = 99;
  CHECK(job.take_run(5, 3, first) == 3);  // chunks 0..2 all on worker 5, which dies
  // A first loss: blamed, back as one ordinary range.
  CHECK(job.requeue(ChunkRange{0, 3}, 5, "five", /*blame=*/true, /*repeat_as_suspect=*/true));
  CHECK_FALSE(job.has_suspects());
  CHECK(job.take_run(6, 3, first) == 3);
  CHECK(first == 0);
  CHECK_FALSE(job.requeue(ChunkRange{0, 3}, 5, "five", true, true));  // not running there: nothing
  // Chunk 0 finishes; worker 6 dies with 1 and 2: they failed before, so they go back as suspects.
  CHECK(job.finish(0, 6, PartialSum{1, 1, 1, 1}));
  std::vector<uint64_t> at_limit;
  CHECK(job.requeue(ChunkRange{1, 2}, 6, "six", true, true, /*limit=*/2, &at_limit));
  CHECK(at_limit == std::vector<uint64_t>{1, 2});
  CHECK(job.has_queued());
  CHECK(job.has_suspects());
  CHECK_FALSE(job.has_ordinary());
  CHECK(job.queued() == 2);
  CHECK(job.retries() == 5);
  CHECK(job.take_suspect(7) == 1);
  CHECK(job.running_on(1) == 7u);
  CHECK(job.requeue(1, 7, "seven", /*blame=*/true) == 3);  // it killed worker 7 running alone
  CHECK(job.failed_on(1) == std::vector<std::string>{"five", "six", "seven"});
  CHECK(job.has_ordinary());  // a chunk requeued after running alone is an ordinary one again
  CHECK(job.take_suspect(8) == 2);
  CHECK_FALSE(job.has_suspects());
}
