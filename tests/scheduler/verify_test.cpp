// BlockVerifier (scheduler/verify.h): how big a block is, which blocks are drawn, where their
// copies may go, how the copies settle a block (agreement, a majority of three, two suspects with
// no third worker), and how a mismatch is narrowed down to the chunk and its worker; a property
// test drives random pieces, workers, faults and departures and checks that every chunk settles
// once with the right bits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <set>

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

// Workers 1..n, some of which may have left; `bad` (0: none) computes chunk `bad_chunk` wrong.
struct Cluster final : VerifyPeers {
  WorkerId n = 3;
  std::set<WorkerId> gone;
  WorkerId bad = 0;
  uint64_t bad_chunk = 0;

  bool someone_else(const std::vector<WorkerId>& excluded) const override {
    for (WorkerId w = 1; w <= n; ++w)
      if (!gone.count(w) && std::find(excluded.begin(), excluded.end(), w) == excluded.end()) return true;
    return false;
  }
  bool connected(WorkerId w) const override { return w >= 1 && w <= n && !gone.count(w); }
  const VerifyPeers& peers() const { return *this; }
  // What `w` gets for chunks `r`: chunk c is worth c + 1, the bad worker's bad chunk a bit more.
  PartialSum compute(ChunkRange r, WorkerId w) const {
    PartialSum out;
    for (uint64_t c = r.first; c < r.end(); ++c) {
      const double x = double(c + 1) + (bad != 0 && w == bad && c == bad_chunk ? 0x1p-20 : 0.0);
      PartialSum one;
      one.exact.add(x);
      one.sum = x;
      one.count = 1;
      one.min = one.max = x;
      merge(out, one);
    }
    return out;
  }
  VerifyCopy copy(ChunkRange r, WorkerId w) const {
    return VerifyCopy{w, "w" + std::to_string(w), "cpu", compute(r, w), false};
  }
};

// Takes what `worker` may take (up to `max` chunks); returns the ranges.
std::vector<ChunkRange> take(BlockVerifier& v, const Cluster& c, WorkerId worker, uint64_t max = 1000) {
  std::vector<ChunkRange> out;
  v.take(worker, max, c.peers(), out);
  return out;
}

// Runs every copy the verifier hands out, worker by worker in turn, each range in two pieces,
// until nothing is queued or running; returns the blocks settled.
std::vector<VerifySettled> drain(BlockVerifier& v, const Cluster& c) {
  std::vector<VerifySettled> settled;
  for (int round = 0; round < 1000 && v.holding() > 0; ++round) {
    for (WorkerId w = 1; w <= c.n; ++w) {
      if (c.gone.count(w)) continue;
      for (const ChunkRange& r : take(v, c, w)) {
        const uint64_t half = r.count / 2;
        if (half > 0)
          if (auto s = v.piece_done({r.first, half}, c.copy({r.first, half}, w), c.peers())) settled.push_back(*s);
        const ChunkRange rest{r.first + half, r.count - half};
        if (auto s = v.piece_done(rest, c.copy(rest, w), c.peers())) settled.push_back(*s);
      }
    }
  }
  return settled;
}

// First copies of every block in random pieces from random workers, never crossing a block.
template <typename Below>
void first_copies(BlockVerifier& v, const Cluster& c, uint64_t chunks, uint64_t block, Below& below) {
  for (uint64_t at = 0; at < chunks;) {
    const uint64_t block_end = std::min(chunks, (at / block + 1) * block);
    const uint64_t n = 1 + below(block_end - at);
    v.first_piece({at, n}, c.copy({at, n}, WorkerId(1 + below(c.n))));
    at += n;
  }
}

// Every chunk settled once; what the job keeps is right wherever a majority could decide; a
// mismatch names a range holding the bad chunk, and the bad worker among its suspects.
void check_settled_once(const BlockVerifier& v, const Cluster& c, uint64_t chunks,
                        const std::vector<VerifySettled>& settled) {
  std::vector<int> times(chunks, 0);
  for (const VerifySettled& s : settled) {
    for (uint64_t k = s.block.first; k < s.block.end(); ++k) ++times[k];
    const bool bad_block = c.bad != 0 && c.bad_chunk >= s.block.first && c.bad_chunk < s.block.end();
    if (!bad_block) CHECK(same_bits(s.keep, c.compute(s.block, 0)));
    if (s.mismatch == nullptr) continue;
    CHECK(bad_block);
    const VerifyMismatch& m = *s.mismatch;
    CHECK(m.chunks.first <= c.bad_chunk);
    CHECK(m.chunks.end() > c.bad_chunk);
    // The one suspect is the bad worker; with no majority, the bad worker is among the suspects.
    const std::string bad_name = "w" + std::to_string(c.bad);
    std::vector<const VerifyCopy*> suspects;
    for (const VerifyCopy& copy : m.copies)
      if (copy.suspect) suspects.push_back(&copy);
    REQUIRE(!suspects.empty());
    if (suspects.size() == 1) {
      CHECK(suspects[0]->worker_name.find(bad_name) != std::string::npos);
    } else {
      CHECK(std::any_of(suspects.begin(), suspects.end(), [&](const VerifyCopy* x) {
        return x->worker_name.find(bad_name) != std::string::npos;
      }));
    }
  }
  CHECK(std::all_of(times.begin(), times.end(), [](int t) { return t == 1; }));
  CHECK(v.verified() == chunks);
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

TEST_CASE("copies that differ go to a third worker, and the odd one is narrowed down to its chunk", "[verify]") {
  Cluster c;
  c.bad = 1;
  c.bad_chunk = 5;
  BlockVerifier v(1.0, 0, 16, 16);
  v.first_piece({0, 16}, c.copy({0, 16}, 1));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 16}});
  CHECK_FALSE(v.piece_done({0, 16}, c.copy({0, 16}, 2), c.peers()));
  CHECK(v.queued() == 16);  // the third copy
  CHECK(take(v, c, 1).empty());
  CHECK(take(v, c, 2).empty());
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 16}});
  CHECK_FALSE(v.piece_done({0, 16}, c.copy({0, 16}, 3), c.peers()));
  // The search: the left half on the odd copy's worker and on another.
  REQUIRE(take(v, c, 1) == std::vector<ChunkRange>{{0, 8}});
  CHECK_FALSE(v.piece_done({0, 8}, c.copy({0, 8}, 1), c.peers()));
  const std::vector<VerifySettled> settled = drain(v, c);
  REQUIRE(settled.size() == 1);
  CHECK(same_bits(settled[0].keep, c.compute({0, 16}, 2)));  // the majority's
  REQUIRE(settled[0].mismatch != nullptr);
  const VerifyMismatch& m = *settled[0].mismatch;
  CHECK(m.chunks == ChunkRange{5, 1});
  REQUIRE(m.copies.size() == 2);
  CHECK(m.copies[0].worker == 1);
  CHECK(m.copies[0].suspect);
  CHECK(same_bits(m.copies[0].partial, c.compute({5, 1}, 1)));
  CHECK(m.copies[1].worker != 1);
  CHECK_FALSE(m.copies[1].suspect);
  CHECK(same_bits(m.copies[1].partial, c.compute({5, 1}, 2)));
  CHECK(v.mismatch_count() == 1);
  CHECK(v.verified() == 16);
}

TEST_CASE("with two workers, copies that differ name both as suspects, the first counts, and the "
          "chunk is still found", "[verify]") {
  Cluster c;
  c.n = 2;
  c.bad = 2;
  c.bad_chunk = 11;
  BlockVerifier v(1.0, 0, 16, 16);
  v.first_piece({0, 16}, c.copy({0, 16}, 1));
  const std::vector<VerifySettled> settled = drain(v, c);
  REQUIRE(settled.size() == 1);
  CHECK(same_bits(settled[0].keep, c.compute({0, 16}, 1)));
  REQUIRE(settled[0].mismatch != nullptr);
  const VerifyMismatch& m = *settled[0].mismatch;
  CHECK(m.chunks == ChunkRange{11, 1});
  REQUIRE(m.copies.size() == 2);
  CHECK(m.copies[0].worker == 2);
  CHECK(m.copies[0].suspect);
  CHECK(m.copies[1].worker == 1);
  CHECK(m.copies[1].suspect);  // no majority
}

TEST_CASE("a first copy in pieces is searched piece by piece: the chunk of the worker that got it "
          "wrong is named", "[verify]") {
  Cluster c;
  c.n = 4;
  c.bad = 2;
  c.bad_chunk = 9;
  BlockVerifier v(1.0, 0, 32, 16);
  v.first_piece({0, 6}, c.copy({0, 6}, 1));
  v.first_piece({6, 10}, c.copy({6, 10}, 2));
  v.first_piece({16, 16}, c.copy({16, 16}, 2));  // another block, which agrees
  const std::vector<VerifySettled> settled = drain(v, c);
  REQUIRE(settled.size() == 2);
  uint64_t mismatches = 0;
  for (const VerifySettled& s : settled) {
    CHECK(same_bits(s.keep, c.compute(s.block, 3)));
    if (!s.mismatch) continue;
    ++mismatches;
    CHECK(s.block == ChunkRange{0, 16});
    CHECK(s.mismatch->chunks == ChunkRange{9, 1});
    CHECK(s.mismatch->copies[0].worker == 2);
  }
  CHECK(mismatches == 1);
}

TEST_CASE("the search ends where it got when the odd copy's worker leaves, and the block still settles", "[verify]") {
  Cluster c;
  c.bad = 1;
  c.bad_chunk = 3;
  BlockVerifier v(1.0, 0, 8, 8);
  v.first_piece({0, 8}, c.copy({0, 8}, 1));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 8}});
  CHECK_FALSE(v.piece_done({0, 8}, c.copy({0, 8}, 2), c.peers()));
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 8}});
  CHECK_FALSE(v.piece_done({0, 8}, c.copy({0, 8}, 3), c.peers()));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 4}});  // the other worker's step runs
  c.gone.insert(1);
  std::vector<ChunkRange> at_limit;
  std::vector<VerifySettled> settled;
  v.worker_gone(1, "w1", /*blame=*/true, /*counted=*/true, 3, c.peers(), at_limit, settled);
  CHECK(at_limit.empty());
  CHECK(settled.empty());  // the running step finishes first
  CHECK_FALSE(v.has_queued());
  const auto s = v.piece_done({0, 4}, c.copy({0, 4}, 2), c.peers());
  REQUIRE(s);
  REQUIRE(s->mismatch != nullptr);
  CHECK(s->mismatch->chunks == ChunkRange{0, 8});  // the block: the chunk was not found
  REQUIRE(s->mismatch->copies.size() == 3);
  CHECK(s->mismatch->copies[0].suspect);
  CHECK(same_bits(s->keep, c.compute({0, 8}, 2)));
}

TEST_CASE("the search ends when the odd copy's worker left between two of its steps", "[verify]") {
  Cluster c;
  c.bad = 1;
  c.bad_chunk = 7;
  BlockVerifier v(1.0, 0, 8, 8);
  v.first_piece({0, 8}, c.copy({0, 8}, 1));
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 8}});
  CHECK_FALSE(v.piece_done({0, 8}, c.copy({0, 8}, 2), c.peers()));
  REQUIRE(take(v, c, 3) == std::vector<ChunkRange>{{0, 8}});
  CHECK_FALSE(v.piece_done({0, 8}, c.copy({0, 8}, 3), c.peers()));
  REQUIRE(take(v, c, 1) == std::vector<ChunkRange>{{0, 4}});  // the suspect's step
  REQUIRE(take(v, c, 2) == std::vector<ChunkRange>{{0, 4}});  // the other's
  CHECK_FALSE(v.piece_done({0, 4}, c.copy({0, 4}, 1), c.peers()));
  // Worker 1 leaves while nothing of this block runs on it; its next step is never asked of it.
  c.gone.insert(1);
  std::vector<ChunkRange> at_limit;
  std::vector<VerifySettled> settled;
  v.worker_gone(1, "w1", /*blame=*/false, /*counted=*/false, 3, c.peers(), at_limit, settled);
  CHECK(settled.empty());
  const auto s = v.piece_done({0, 4}, c.copy({0, 4}, 2), c.peers());
  REQUIRE(s);  // the left halves agree: the search would go right, but its worker is gone
  REQUIRE(s->mismatch != nullptr);
  CHECK(s->mismatch->chunks == ChunkRange{0, 8});
  CHECK(v.holding() == 0);
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
        v.worker_gone(w, "w" + std::to_string(w), true, true, UINT32_MAX, c.peers(), at_limit, settled);
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

// Issue 49: a worker that leaves during the search (the odd copy's, or the other one's) aborted
// psched when the block settled while still listed as having queued copies. Every event, in any
// order, at any step of any block: results in pieces, failed chunks, deaths and stops of any worker
// (the bad one often), and workers joining.
TEST_CASE("random results, mismatches, failures, departures of any worker (the odd copy's too), stops "
          "and joins: nothing aborts, every block settles once, and a search finds the chunk or says "
          "why it stopped", "[verify]") {
  std::mt19937_64 rng(20261204);
  auto below = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  for (int trial = 0; trial < 1000; ++trial) {
    Cluster c;
    c.n = WorkerId(2 + below(3));
    const uint64_t chunks = 1 + below(100), block = uint64_t{1} << below(5);
    c.bad = below(4) == 0 ? 0 : WorkerId(1 + below(c.n));
    c.bad_chunk = below(chunks);
    BlockVerifier v(1.0, trial, chunks, block);
    first_copies(v, c, chunks, block, below);
    std::vector<VerifySettled> settled;
    std::vector<std::pair<WorkerId, ChunkRange>> running;
    auto live = [&] {
      std::vector<WorkerId> out;
      for (WorkerId w = 1; w <= c.n; ++w)
        if (!c.gone.count(w)) out.push_back(w);
      return out;
    };
    auto piece = [&](size_t i, bool fail) {
      auto [rw, r] = running[i];
      const uint64_t n = fail ? 1 : 1 + below(r.count);  // from its front
      if (n < r.count) {
        running[i].second = {r.first + n, r.count - n};
      } else {
        running.erase(running.begin() + std::ptrdiff_t(i));
      }
      if (fail) {
        std::optional<VerifySettled> s;
        v.chunk_failed(r.first, rw, "w" + std::to_string(rw), c.peers(), s);
        if (s) settled.push_back(*s);
      } else if (auto s = v.piece_done({r.first, n}, c.copy({r.first, n}, rw), c.peers())) {
        settled.push_back(*s);
      }
    };
    auto leave = [&](WorkerId w, bool blame) {
      c.gone.insert(w);
      std::vector<ChunkRange> at_limit;
      v.worker_gone(w, "w" + std::to_string(w), blame, blame, UINT32_MAX, c.peers(), at_limit, settled);
      running.erase(std::remove_if(running.begin(), running.end(), [&](const auto& x) { return x.first == w; }),
                    running.end());
    };
    for (int step = 0; step < 5000 && v.holding() > 0; ++step) {
      const std::vector<WorkerId> here = live();
      const uint64_t what = below(20);
      if (here.empty() || (what == 19 && c.n < 12)) {
        ++c.n;  // a worker joins
        continue;
      }
      const WorkerId w = here[below(here.size())];
      if (what < 7) {
        for (const ChunkRange& r : take(v, c, w, 1 + below(64))) running.emplace_back(w, r);
      } else if (what < 16 && !running.empty()) {
        piece(below(running.size()), /*fail=*/what == 15);
      } else if (what >= 16 && what < 19) {  // a death or a stop; the bad worker often
        leave(c.bad != 0 && !c.gone.count(c.bad) && below(2) == 0 ? c.bad : w, /*blame=*/what != 18);
      }
    }
    // Then the cluster settles down: two workers at least, every copy run to the end.
    for (int round = 0; round < 1000 && v.holding() > 0; ++round) {
      while (live().size() < 2) ++c.n;
      for (const WorkerId w : live())
        for (const ChunkRange& r : take(v, c, w)) running.emplace_back(w, r);
      while (!running.empty()) piece(running.size() - 1, false);
    }
    INFO("trial " << trial << ": " << chunks << " chunks, blocks of " << block << ", " << c.n << " workers, bad "
                  << c.bad << " at chunk " << c.bad_chunk);
    REQUIRE(v.holding() == 0);
    CHECK_FALSE(v.has_queued());
    for (const VerifySettled& s : settled) {
      if (s.mismatch == nullptr) continue;
      // Found down to the chunk, or stopped short saying why.
      CHECK((s.mismatch->chunks.count == 1) == (s.mismatch->search == VerifySearch::kFound));
    }
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
    v.worker_gone(w, "w" + std::to_string(w), /*blame=*/true, /*counted=*/false, limit, c.peers(), at_limit, settled);
    CHECK(at_limit.empty());
  }
  CHECK(v.failed_on(0).size() == BlockVerifier::kLostBeside * limit - 1);
  CHECK(v.failures(0) == 0);
  // The last loss the block takes: it gives up, so a copy that kills every worker cannot loop.
  REQUIRE(take(v, c, w) == std::vector<ChunkRange>{{0, 4}});
  c.gone.insert(w);
  v.worker_gone(w, "w" + std::to_string(w), /*blame=*/true, /*counted=*/false, limit, c.peers(), at_limit, settled);
  CHECK(at_limit == std::vector<ChunkRange>{{0, 4}});
}
