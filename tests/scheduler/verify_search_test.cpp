// The search that narrows a mismatched verify block down to its chunk (BlockSearch,
// scheduler/verify_search.h): alone, step by step, and a property test of its phase's moves
// against the list in its header; then driven through BlockVerifier as the scheduler drives it: a
// majority of three, two suspects with no third worker, a first copy in pieces searched piece by
// piece, the odd copy's worker leaving mid-search; a property test with every event in any order
// checks that nothing aborts and a search finds the chunk or says why it stopped.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "scheduler/verify.h"
#include "verify_cluster.h"

using namespace psched;
using namespace psched::test;

namespace {

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

// Feeds a step pair's copies to `search`, the odd worker's first; returns what the search asks next.
BlockSearch::Next both_in(BlockSearch& search, const Cluster& c, ChunkRange r, WorkerId odd, WorkerId other) {
  const BlockSearch::Next waiting = search.step_done(true, c.copy(r, odd), c.peers());
  CHECK(waiting.steps.empty());
  CHECK_FALSE(waiting.ended);
  return search.step_done(false, c.copy(r, other), c.peers());
}

// A search of block `block` whose odd copy is worker 1's, whole, against worker 2's partial.
BlockSearch whole_block_search(const Cluster& c, ChunkRange block, bool majority) {
  return BlockSearch(block, c.compute(block, 2), majority, {{block, c.copy(block, 1)}});
}

// Brings block {0, chunks} of `v` to its search as the scheduler would: worker 1's first copy, then
// worker 2's and worker 3's; with worker 1 bad, the majority makes its copy the odd one.
void start_search(BlockVerifier& v, const Cluster& c, uint64_t chunks) {
  const ChunkRange block{0, chunks};
  v.first_piece(block, c.copy(block, 1));
  for (const WorkerId w : {WorkerId{2}, WorkerId{3}}) {
    REQUIRE(take(v, c, w) == std::vector<ChunkRange>{block});
    CHECK_FALSE(v.piece_done(block, c.copy(block, w), c.peers()));
  }
}

std::vector<ChunkRange> asked(const BlockSearch::Next& next) {
  std::vector<ChunkRange> out;
  for (const BlockSearch::Step& s : next.steps) out.push_back(s.range);
  return out;
}

}  // namespace

TEST_CASE("a block search asks for the left half on the odd worker and on another, follows the half "
          "that differs, and ends on the chunk with both copies of it", "[verify]") {
  Cluster c;
  c.bad = 1;
  c.bad_chunk = 5;
  BlockSearch search = whole_block_search(c, {0, 8}, /*majority=*/true);
  BlockSearch::Next next = search.start(c.peers());
  REQUIRE(next.steps.size() == 2);
  CHECK(next.steps[0].on_suspect);
  CHECK_FALSE(next.steps[1].on_suspect);
  CHECK(asked(next) == std::vector<ChunkRange>{{0, 4}, {0, 4}});
  CHECK(search.suspect() == 1);
  next = both_in(search, c, {0, 4}, 1, 2);  // agree: the right half differs, so its left half next
  CHECK(asked(next) == std::vector<ChunkRange>{{4, 2}, {4, 2}});
  next = both_in(search, c, {4, 2}, 1, 2);  // differ
  CHECK(asked(next) == std::vector<ChunkRange>{{4, 1}, {4, 1}});
  next = both_in(search, c, {4, 1}, 1, 2);  // agree: chunk 5 is the one left
  CHECK(asked(next) == std::vector<ChunkRange>{{5, 1}, {5, 1}});
  next = both_in(search, c, {5, 1}, 1, 2);
  CHECK(next.steps.empty());
  REQUIRE(next.ended);
  CHECK(*next.ended == VerifySearch::kFound);
  REQUIRE(next.found);
  CHECK(next.found->chunk == ChunkRange{5, 1});
  CHECK(next.found->odd.worker == 1);
  CHECK(next.found->odd.suspect);
  CHECK(same_bits(next.found->odd.partial, c.compute({5, 1}, 1)));
  CHECK(next.found->other.worker == 2);
  CHECK_FALSE(next.found->other.suspect);  // the majority's
}

TEST_CASE("a block search stops when the odd copy's worker leaves, or when no other worker is left", "[verify]") {
  Cluster c;
  c.n = 2;
  c.bad = 1;
  BlockSearch search = whole_block_search(c, {0, 8}, /*majority=*/false);
  REQUIRE(search.start(c.peers()).steps.size() == 2);
  CHECK_FALSE(search.stops_without(3, c.peers()));
  c.gone.insert(2);
  CHECK(search.stops_without(2, c.peers()) == VerifySearch::kNoOtherWorker);
  c.gone = {1};
  CHECK(search.stops_without(1, c.peers()) == VerifySearch::kOddWorkerLeft);
}

// Every move of a search alone, with its steps' results in any order, workers leaving and an odd
// worker that at times agrees when asked again: after each call the phase is the one what the call
// asks implies, every move is one verify_search.h lists, each listed move happens, and a chunk
// found is the bad one.
TEST_CASE("a block search moves only as its header lists, and its phase says what it waits for", "[verify]") {
  using Phase = BlockSearch::Phase;
  const std::set<std::pair<Phase, Phase>> listed = {
      {Phase::kNew, Phase::kChecking},      {Phase::kNew, Phase::kHalving},      {Phase::kNew, Phase::kEnded},
      {Phase::kChecking, Phase::kChecking}, {Phase::kChecking, Phase::kHalving}, {Phase::kChecking, Phase::kEnded},
      {Phase::kHalving, Phase::kHalving},   {Phase::kHalving, Phase::kChecking}, {Phase::kHalving, Phase::kEnded}};
  std::set<std::pair<Phase, Phase>> seen;
  std::mt19937_64 rng(20261128);
  auto below = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  for (int trial = 0; trial < 2000; ++trial) {
    Cluster c;
    c.n = WorkerId(2 + below(3));
    const ChunkRange block{0, uint64_t{1} << below(6)};
    c.bad = WorkerId(1 + below(c.n));
    c.bad_chunk = below(block.count);
    const bool flaky = below(4) == 0;  // the odd worker computes right when asked again
    // The odd copy: the bad worker's whole, or a first copy in pieces from any workers.
    std::vector<std::pair<ChunkRange, VerifyCopy>> pieces;
    if (below(2) == 0) {
      pieces.emplace_back(block, c.copy(block, c.bad));
    } else {
      for (uint64_t at = 0; at < block.count;) {
        const ChunkRange r{at, 1 + below(block.count - at)};
        pieces.emplace_back(r, c.copy(r, WorkerId(1 + below(c.n))));
        at = r.end();
      }
    }
    if (below(8) == 0) c.gone.insert(WorkerId(1 + below(c.n)));  // before the search starts
    BlockSearch search(block, c.compute(block, 0), below(2) == 0, pieces);
    INFO("trial " << trial << ": block of " << block.count << ", " << pieces.size() << " pieces, " << c.n
                  << " workers, bad " << c.bad << " at chunk " << c.bad_chunk << (flaky ? ", flaky" : ""));
    REQUIRE(search.phase() == Phase::kNew);
    std::vector<BlockSearch::Step> running;
    std::optional<BlockSearch::Next> last;
    bool stopped = false;
    // What the call that made `next` from phase `from` implies, and the move it made.
    auto follow = [&](Phase from, BlockSearch::Next next) {
      const Phase to = search.phase();
      if (next.ended) {
        CHECK(to == Phase::kEnded);
        CHECK(next.steps.empty());
      } else if (next.steps.size() == 1) {
        CHECK(to == Phase::kChecking);
        CHECK_FALSE(next.steps[0].on_suspect);
      } else if (next.steps.size() == 2) {
        CHECK(to == Phase::kHalving);
        CHECK(next.steps[0].on_suspect);
        CHECK_FALSE(next.steps[1].on_suspect);
        CHECK(next.steps[0].range == next.steps[1].range);
      } else {  // the pair's other step is still running
        REQUIRE(next.steps.empty());
        CHECK(from == Phase::kHalving);
        CHECK(to == Phase::kHalving);
        CHECK(running.size() == 1);
        return;
      }
      CHECK(running.empty());
      seen.emplace(from, to);
      CHECK(listed.count({from, to}) == 1);
      running = next.steps;
      if (next.ended) last = std::move(next);
    };
    follow(Phase::kNew, search.start(c.peers()));
    for (int event = 0; event < 1000 && !last && !stopped; ++event) {
      REQUIRE(!running.empty());
      if (below(16) == 0) {  // a worker leaves; the verifier ends the search if it must
        const WorkerId w = WorkerId(1 + below(c.n));
        c.gone.insert(w);
        stopped = search.stops_without(w, c.peers()).has_value();
        continue;
      }
      const size_t i = below(running.size());
      const BlockSearch::Step step = running[i];
      running.erase(running.begin() + std::ptrdiff_t(i));
      VerifyCopy got;
      if (step.on_suspect) {
        got = c.copy(step.range, search.suspect());
        if (flaky) got.partial = c.compute(step.range, 0);
      } else {  // on a connected worker other than the suspect (it may be the bad one)
        WorkerId w = WorkerId(1 + below(c.n));
        while (!c.connected(w) || w == search.suspect()) w = WorkerId(1 + below(c.n));
        got = c.copy(step.range, w);
      }
      const Phase from = search.phase();
      follow(from, search.step_done(step.on_suspect, std::move(got), c.peers()));
    }
    REQUIRE((last.has_value() || stopped));
    if (last && *last->ended == VerifySearch::kFound && last->found) {
      CHECK(last->found->chunk == ChunkRange{c.bad_chunk, 1});
      CHECK((last->found->odd.worker == c.bad || last->found->other.worker == c.bad));
    }
  }
  CHECK(seen == listed);
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
  start_search(v, c, 8);
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
  start_search(v, c, 8);
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
        v.chunk_failed(r.first, rw, fmt::format("w{}", rw), c.peers(), s);
        if (s) settled.push_back(*s);
      } else if (auto s = v.piece_done({r.first, n}, c.copy({r.first, n}, rw), c.peers())) {
        settled.push_back(*s);
      }
    };
    auto leave = [&](WorkerId w, bool blame) {
      c.gone.insert(w);
      std::vector<ChunkRange> at_limit;
      v.worker_gone(w, fmt::format("w{}", w), blame, blame, UINT32_MAX, c.peers(), at_limit, settled);
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
