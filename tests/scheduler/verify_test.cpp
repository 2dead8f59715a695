// ChunkVerifier (scheduler/verify.h): which chunks are drawn, where their copies may go, and how the
// copies settle a chunk (agreement, a majority of three, two suspects with no third worker).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <optional>

#include "scheduler/verify.h"

using namespace psched;

namespace {

PartialSum partial(double sum) { return PartialSum{sum, 10, 0.0, 1.0}; }

PartialSum flipped(PartialSum p) {
  uint64_t bits;
  std::memcpy(&bits, &p.sum, sizeof bits);
  bits ^= 1;
  std::memcpy(&p.sum, &bits, sizeof bits);
  return p;
}

VerifyCopy copy(WorkerId w, PartialSum p) {
  VerifyCopy c;
  c.worker = w;
  c.worker_name = "w" + std::to_string(w);
  c.device_name = "cpu";
  c.partial = p;
  return c;
}

// A cluster of workers 1..n.
ChunkVerifier::SomeoneElse cluster_of(WorkerId n) {
  return [n](const std::vector<WorkerId>& excluded) {
    for (WorkerId w = 1; w <= n; ++w)
      if (std::find(excluded.begin(), excluded.end(), w) == excluded.end()) return true;
    return false;
  };
}

// Takes what `worker` may take; returns the chunks.
std::vector<uint64_t> take(ChunkVerifier& v, WorkerId worker, WorkerId cluster) {
  std::vector<uint64_t> out;
  v.take(worker, 100, cluster_of(cluster), out);
  return out;
}

// Copy `a` is the chunk's first; copy b's worker takes the second and returns it.
std::optional<PartialSum> two_copies(ChunkVerifier& v, uint64_t chunk, const VerifyCopy& a,
                                     const VerifyCopy& b, WorkerId cluster,
                                     const VerifyMismatch** mismatch) {
  v.first_copy(chunk, a);
  REQUIRE(take(v, b.worker, cluster) == std::vector<uint64_t>{chunk});
  CHECK(v.running_on(chunk) == b.worker);
  return v.copy_done(chunk, b, cluster_of(cluster), mismatch);
}

}  // namespace

TEST_CASE("same_bits tells apart the last bit of the sum, -0.0 from 0.0, and every field", "[verify]") {
  CHECK(same_bits(partial(1.5), partial(1.5)));
  CHECK_FALSE(same_bits(partial(1.5), flipped(partial(1.5))));
  CHECK_FALSE(same_bits(partial(0.0), partial(-0.0)));
  PartialSum other = partial(1.5);
  other.count = 11;
  CHECK_FALSE(same_bits(partial(1.5), other));
  other = partial(1.5);
  other.max = 2.0;
  CHECK_FALSE(same_bits(partial(1.5), other));
}

TEST_CASE("the verify draw is a deterministic function of seed and chunk, near the fraction", "[verify]") {
  uint64_t drawn = 0, again = 0, other_seed = 0, all = 0, none = 0;
  for (uint64_t c = 0; c < 10000; ++c) {
    drawn += verify_drawn(7, c, 0.05);
    again += verify_drawn(7, c, 0.05);
    other_seed += verify_drawn(8, c, 0.05) != verify_drawn(7, c, 0.05);
    all += verify_drawn(7, c, 1.0);
    none += verify_drawn(7, c, 0.0);
  }
  CHECK(drawn == again);
  CHECK(drawn > 400);
  CHECK(drawn < 600);
  CHECK(other_seed > 0);
  CHECK(all == 10000);
  CHECK(none == 0);
}

TEST_CASE("a second copy goes to another worker, and agreeing copies settle the chunk", "[verify]") {
  ChunkVerifier v(1.0, 0);
  v.first_copy(3, copy(1, partial(2.0)));
  CHECK(take(v, 1, 2).empty());  // worker 1 computed it; worker 2 exists
  REQUIRE(take(v, 2, 2) == std::vector<uint64_t>{3});
  CHECK(v.running_on(3) == WorkerId{2});
  const VerifyMismatch* mismatch = nullptr;
  const auto keep = v.copy_done(3, copy(2, partial(2.0)), cluster_of(2), &mismatch);
  REQUIRE(keep);
  CHECK(same_bits(*keep, partial(2.0)));
  CHECK(mismatch == nullptr);
  CHECK(v.verified() == 1);
  CHECK(v.mismatch_count() == 0);
  CHECK(v.holding() == 0);
}

TEST_CASE("with one worker the copy runs on it again, and is counted as such", "[verify]") {
  ChunkVerifier v(1.0, 0);
  const VerifyMismatch* mismatch = nullptr;
  REQUIRE(two_copies(v, 0, copy(1, partial(2.0)), copy(1, partial(2.0)), 1, &mismatch));
  CHECK(v.same_worker() == 1);
}

TEST_CASE("copies that differ go to a third worker, whose copy names the odd one out", "[verify]") {
  ChunkVerifier v(1.0, 0);
  const VerifyMismatch* mismatch = nullptr;  // worker 1 computes wrong
  CHECK_FALSE(two_copies(v, 5, copy(1, flipped(partial(2.0))), copy(2, partial(2.0)), 3, &mismatch));
  CHECK_FALSE(v.running_on(5));  // the third copy is queued
  CHECK(v.queued() == 1);
  CHECK(take(v, 1, 3).empty());
  CHECK(take(v, 2, 3).empty());
  REQUIRE(take(v, 3, 3) == std::vector<uint64_t>{5});
  const auto keep = v.copy_done(5, copy(3, partial(2.0)), cluster_of(3), &mismatch);
  REQUIRE(keep);
  CHECK(same_bits(*keep, partial(2.0)));  // the majority's
  REQUIRE(mismatch != nullptr);
  CHECK(mismatch->chunk == 5);
  REQUIRE(mismatch->copies.size() == 3);
  CHECK(mismatch->copies[0].suspect);
  CHECK_FALSE(mismatch->copies[1].suspect);
  CHECK_FALSE(mismatch->copies[2].suspect);
  CHECK(v.mismatch_count() == 1);
  CHECK(v.verified() == 1);
}

TEST_CASE("with two workers, copies that differ name both as suspects and the first copy counts", "[verify]") {
  ChunkVerifier v(1.0, 0);
  const VerifyMismatch* mismatch = nullptr;
  const auto keep = two_copies(v, 1, copy(1, partial(2.0)), copy(2, flipped(partial(2.0))), 2, &mismatch);
  REQUIRE(keep);
  CHECK(same_bits(*keep, partial(2.0)));
  REQUIRE(mismatch != nullptr);
  CHECK(mismatch->copies[0].suspect);
  CHECK(mismatch->copies[1].suspect);
}

TEST_CASE("a copy whose worker leaves goes back to the queue for another", "[verify]") {
  ChunkVerifier v(1.0, 0);
  v.first_copy(2, copy(1, partial(2.0)));
  REQUIRE(take(v, 2, 3) == std::vector<uint64_t>{2});
  CHECK(v.running_chunks_of(2) == std::vector<uint64_t>{2});
  CHECK(v.requeue(2, 2, "w2", /*blame=*/true) == 1);
  CHECK(v.failed_on(2) == std::vector<std::string>{"w2"});
  CHECK(v.queued() == 1);
  CHECK_FALSE(v.running_on(2));  // queued again, running nowhere
  CHECK(v.running_chunks_of(2).empty());
  CHECK(v.requeue(2, 2, "w2", /*blame=*/true) == 0);  // not running on 2: nothing moves
  REQUIRE(take(v, 3, 3) == std::vector<uint64_t>{2});
  CHECK(v.running_on(2) == WorkerId{3});
  const VerifyMismatch* mismatch = nullptr;
  CHECK(v.copy_done(2, copy(3, partial(2.0)), cluster_of(3), &mismatch));
}
