// BlockVerifier (scheduler/verify.h): how big a block is, which blocks are drawn, where their
// copies may go, how the copies settle a block, and what a lost or failed copy does; a property
// test drives random pieces, workers, faults and departures and checks that every chunk settles
// once with the right bits. How a mismatch is narrowed down to its chunk: verify_search_test.cpp.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "scheduler/verify.h"
#include "verify_cluster.h"

using namespace psched;
using namespace psched::test;

namespace {

PartialSum partial(double sum) { return PartialSum{sum, 10, 0.0, 1.0}; }

PartialSum flipped(PartialSum p) {
  uint64_t bits;
  std::memcpy(&bits, &p.sum, sizeof bits);
  bits ^= 1;
  std::memcpy(&p.sum, &bits, sizeof bits);
  return p;
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

TEST_CASE("a verify block is 2^30 elements or more, a power of two chunks, at least 64 to a job", "[verify]") {
  CHECK(verify_block_chunks(10000, 100000000) == 16);     // 10000^2 chunks
  CHECK(verify_block_chunks(2500, 100000000) == 16);      // the DeepOps benchmark: 157 blocks
  CHECK(verify_block_chunks(250000, 1000000) == 2048);    // 1000^2 chunks
  CHECK(verify_block_chunks(uint64_t{1} << 40, 1) == uint64_t{1} << 30);
  CHECK(verify_block_chunks(1000, 4000000000) == 1);      // a chunk above 2^30 elements: a block each
  CHECK(verify_block_chunks(400, 100) == 4);              // a small job: 100 blocks of 4
  CHECK(verify_block_chunks(100, 1) == 1);
  CHECK(verify_block_chunks(0, 0) == 1);
}

TEST_CASE("the verify draw is a deterministic function of seed and block, near the fraction", "[verify]") {
  uint64_t drawn = 0, again = 0, other_seed = 0, all = 0, none = 0;
  for (uint64_t b = 0; b < 10000; ++b) {
    drawn += verify_drawn(7, b, 0.05);
    again += verify_drawn(7, b, 0.05);
    other_seed += verify_drawn(8, b, 0.05) != verify_drawn(7, b, 0.05);
    all += verify_drawn(7, b, 1.0);
    none += verify_drawn(7, b, 0.0);
  }
  CHECK(drawn == again);
  CHECK(drawn > 400);
  CHECK(drawn < 600);
  CHECK(other_seed > 0);
  CHECK(all == 10000);
  CHECK(none == 0);
  BlockVerifier v(0.5, 7, 100, 8);
  for (uint64_t chunk = 0; chunk < 100; ++chunk) CHECK(v.drawn(chunk) == verify_drawn(7, chunk / 8, 0.5));
  CHECK(v.block_of(99) == ChunkRange{96, 4});  // the last block is short
}

TEST_CASE("a block's first copy in pieces from two workers goes to a third whole, and agreeing "
          "copies settle it", "[verify]") {
  Cluster c;
  BlockVerifier v(1.0, 0, 16, 8);
  v.first_piece({0, 3}, c.copy({0, 3}, 1));
  CHECK_FALSE(v.has_queued());  // not whole yet
  v.first_piece({3, 5}, c.copy({3, 5}, 2));
  CHECK(v.queued() == 8);
  CHECK(take(v, c, 1).empty());
  CHECK(take(v, c, 2).empty());
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 8}});
  CHECK(v.running_here({2, 4}, 3));
  CHECK_FALSE(v.running_here({2, 4}, 2));
  CHECK_FALSE(v.piece_done({0, 5}, c.copy({0, 5}, 3), c.peers()));  // a piece: not whole yet
  const auto s = v.piece_done({5, 3}, c.copy({5, 3}, 3), c.peers());
  REQUIRE(s);
  CHECK(s->block == ChunkRange{0, 8});
  CHECK(same_bits(s->keep, c.compute({0, 8}, 1)));
  CHECK(s->credit == 1);
  CHECK(s->mismatch == nullptr);
  CHECK(v.verified() == 8);
  CHECK(v.holding() == 0);
}

TEST_CASE("with one worker the copy runs on it again, and is counted as such", "[verify]") {
  Cluster c;
  c.n = 1;
  BlockVerifier v(1.0, 0, 4, 4);
  v.first_piece({0, 4}, c.copy({0, 4}, 1));
  REQUIRE(take(v, c, 1) == std::vector<ChunkRange>{{0, 4}});
  REQUIRE(v.piece_done({0, 4}, c.copy({0, 4}, 1), c.peers()));
  CHECK(v.same_worker() == 4);
}

TEST_CASE("a copy whose worker dies goes back to the queue for another, blamed", "[verify]") {
  Cluster c;
  BlockVerifier v(1.0, 0, 4, 4);
  v.first_piece({0, 4}, c.copy({0, 4}, 1));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 4}});
  CHECK(v.running_of(2) == std::vector<ChunkRange>{{0, 4}});
  CHECK_FALSE(v.piece_done({0, 2}, c.copy({0, 2}, 2), c.peers()));  // half of it came back
  c.gone.insert(2);
  std::vector<ChunkRange> at_limit;
  std::vector<VerifySettled> settled;
  v.worker_gone(2, "w2", /*blame=*/true, /*counted=*/true, 1, c.peers(), at_limit, settled);
  CHECK(at_limit == std::vector<ChunkRange>{{0, 4}});  // a limit of one failure, shown
  CHECK(v.failed_on(3) == std::vector<std::string>{"w2"});
  CHECK(v.queued() == 4);
  CHECK(v.running_of(2).empty());
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 4}});  // whole again
  CHECK(v.piece_done({0, 4}, c.copy({0, 4}, 3), c.peers()));
}

TEST_CASE("a copy with a failed chunk runs again once its other chunks are in", "[verify]") {
  Cluster c;
  BlockVerifier v(1.0, 0, 4, 4);
  v.first_piece({0, 4}, c.copy({0, 4}, 1));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 4}});
  std::optional<VerifySettled> settled;
  CHECK(v.awaited_from(2) == 4);
  CHECK(v.chunk_failed(1, 2, "w2", c.peers(), settled) == 1);
  CHECK_FALSE(settled);
  CHECK_FALSE(v.has_queued());  // chunks 0, 2 and 3 are still coming
  CHECK(v.awaited_from(2) == 3);  // what the worker's window still holds for the copy
  CHECK(v.running_of(2) == std::vector<ChunkRange>{{0, 4}});
  CHECK_FALSE(v.piece_done({0, 1}, c.copy({0, 1}, 2), c.peers()));
  CHECK(v.awaited_from(2) == 2);
  CHECK_FALSE(v.piece_done({2, 2}, c.copy({2, 2}, 2), c.peers()));
  CHECK(v.awaited_from(2) == 0);
  CHECK(v.queued() == 4);
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 4}});
  CHECK(v.piece_done({0, 4}, c.copy({0, 4}, 3), c.peers()));
}

TEST_CASE("random pieces, workers, faults and departures: every chunk settles once with the right bits, "
          "and a mismatch names the bad chunk", "[verify]") {
  std::mt19937_64 rng(20261126);
  auto below = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    Cluster c;
    c.n = WorkerId(2 + below(4));
    const uint64_t chunks = 1 + below(200), block = uint64_t{1} << below(6);
    c.bad = below(2) == 0 ? WorkerId(1 + below(c.n)) : 0;
    c.bad_chunk = below(chunks);
    const bool departures = below(3) == 0;
    BlockVerifier v(1.0, trial, chunks, block);
    first_copies(v, c, chunks, block, below);
    std::vector<VerifySettled> settled;
    std::vector<std::pair<WorkerId, ChunkRange>> running;
    for (int step = 0; step < 20000 && v.holding() > 0; ++step) {
      const WorkerId w = WorkerId(1 + below(c.n));
      if (c.gone.count(w)) continue;
      const uint64_t what = below(10);
      if (what < 4) {
        for (const ChunkRange& r : take(v, c, w, 1 + below(64))) running.emplace_back(w, r);
      } else if (what < 9 && !running.empty()) {
        const size_t i = below(running.size());
        auto [rw, r] = running[i];
        const uint64_t n = 1 + below(r.count);  // a piece from its front
        if (n < r.count) {
          running[i].second = {r.first + n, r.count - n};
        } else {
          running.erase(running.begin() + i);
        }
        if (auto s = v.piece_done({r.first, n}, c.copy({r.first, n}, rw), c.peers())) settled.push_back(*s);
      } else if (departures && c.gone.size() + 2 < c.n) {  // a worker dies; it never comes back
        c.gone.insert(w);
        std::vector<ChunkRange> at_limit;
        v.worker_gone(w, fmt::format("w{}", w), true, true, UINT32_MAX, c.peers(), at_limit, settled);
        running.erase(std::remove_if(running.begin(), running.end(), [&](const auto& x) { return x.first == w; }),
                      running.end());
      }
    }
    INFO("trial " << trial << ": " << chunks << " chunks, blocks of " << block << ", " << c.n << " workers, bad "
                  << c.bad << " at chunk " << c.bad_chunk);
    REQUIRE(v.holding() == 0);
    check_settled_once(v, c, chunks, settled);
  }
}

TEST_CASE("a copy lost with workers that ran other work too is named but not held to the limit", "[verify]") {
  Cluster c;
  c.n = 100;
  BlockVerifier v(1.0, 0, 4, 4);
  v.first_piece({0, 4}, c.copy({0, 4}, 1));
  std::vector<ChunkRange> at_limit;
  std::vector<VerifySettled> settled;
  const uint32_t limit = 2;
  // Workers 2, 3, ... each take the copy and are killed from outside beside other work.
  WorkerId w = 2;
  for (; w < 2 + BlockVerifier::kLostBeside * limit - 1; ++w) {
    REQUIRE(take(v, c, w) == std::vector<ChunkRange>{{0, 4}});
    c.gone.insert(w);
    v.worker_gone(w, fmt::format("w{}", w), /*blame=*/true, /*counted=*/false, limit, c.peers(), at_limit, settled);
    CHECK(at_limit.empty());
  }
  CHECK(v.failed_on(0).size() == BlockVerifier::kLostBeside * limit - 1);
  CHECK(v.failures(0) == 0);
  // The last loss the block takes: it gives up, so a copy that kills every worker cannot loop.
  REQUIRE(take(v, c, w) == std::vector<ChunkRange>{{0, 4}});
  c.gone.insert(w);
  v.worker_gone(w, fmt::format("w{}", w), /*blame=*/true, /*counted=*/false, limit, c.peers(), at_limit, settled);
  CHECK(at_limit == std::vector<ChunkRange>{{0, 4}});
}
