// The range state machine on its own (no sockets): its events, and a property test that drives it
// with random event sequences against a per-chunk model.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <optional>
#include <random>

#include "core/exact_sum.h"
#include "scheduler/range_table.h"

using namespace psched;

namespace Catch {
template <>
struct StringMaker<ChunkRange> {
  static std::string convert(const ChunkRange& r) {
    return fmt::format("[{} +{}]", r.first, r.count);
  }
};
}  // namespace Catch

TEST_CASE("ranges: taken in order, a worker's adjacent runs held as one, finished in pieces", "[range_table]") {
  RangeTable t(100);
  CHECK(t.take(1, 10) == ChunkRange{0, 10});
  CHECK(t.take(1, 10) == ChunkRange{10, 10});
  CHECK(t.take(2, 5) == ChunkRange{20, 5});
  CHECK(t.running_of(1) == std::vector<ChunkRange>{{0, 20}});
  CHECK(t.entries() == 2);  // worker 1's two runs are one entry
  CHECK(t.running_here({5, 10}, 1));
  CHECK_FALSE(t.running_here({15, 10}, 1));  // 20.. runs on worker 2
  CHECK_FALSE(t.finish({15, 10}, 1));
  CHECK(t.finish({5, 3}, 1));  // progress inside a range
  CHECK(t.running_of(1) == std::vector<ChunkRange>{{0, 5}, {8, 12}});
  CHECK(t.done() == 3);
  CHECK(t.state(6) == ChunkState::kDone);
  CHECK(t.state(4) == ChunkState::kRunning);
  CHECK(t.running_on(4) == WorkerId{1});
  CHECK(t.all_settled({5, 3}));
  CHECK_FALSE(t.all_settled({4, 2}));
  CHECK(t.queued() == 75);
  CHECK(t.running() == 22);
}

TEST_CASE("ranges: a lost worker's runs go back and come out first, split to fit", "[range_table]") {
  RangeTable t(50);
  t.take(1, 20);
  CHECK(t.finish({0, 5}, 1));
  for (const ChunkRange& r : t.running_of(1)) CHECK(t.requeue(r, 1, /*suspect=*/false));
  CHECK(t.requeued_total() == 15);
  CHECK(t.state(7) == ChunkState::kQueued);
  CHECK(t.take(2, 10) == ChunkRange{5, 10});  // the re-queued range first, cut at the max
  CHECK(t.take(2, 10) == ChunkRange{15, 5});
  CHECK(t.take(2, 100) == ChunkRange{20, 30});
  CHECK_FALSE(t.has_ordinary());
}

TEST_CASE("ranges: suspect ranges go back whole and come out only by take_suspect in pieces", "[range_table]") {
  RangeTable t(4);
  t.take(1, 4);
  CHECK(t.requeue({1, 2}, 1, /*suspect=*/true));
  CHECK(t.requeue({3, 1}, 1, /*suspect=*/true));
  CHECK(t.has_suspects());
  CHECK_FALSE(t.has_ordinary());
  CHECK(t.queued() == 3);
  CHECK(t.state(2) == ChunkState::kSuspect);
  CHECK(t.oldest_suspect() == 2);
  CHECK(t.take_suspect(3, 1) == ChunkRange{1, 1});
  CHECK(t.running_on(1) == WorkerId{3});
  CHECK(t.oldest_suspect() == 1);
  CHECK(t.state(2) == ChunkState::kSuspect);
  CHECK(t.take_suspect(4, 5) == ChunkRange{2, 1});
  CHECK(t.take_suspect(5, 5) == ChunkRange{3, 1});
  CHECK_FALSE(t.has_suspects());
}

TEST_CASE("ranges: verify holds a chunk until it is settled", "[range_table]") {
  RangeTable t(3);
  t.take(1, 3);
  CHECK_FALSE(t.hold({1, 1}, 2));
  CHECK(t.hold({1, 1}, 1));
  CHECK(t.state(1) == ChunkState::kHeld);
  CHECK(t.all_settled({1, 1}));
  CHECK_FALSE(t.complete());
  CHECK(t.finish({0, 1}, 1));
  CHECK(t.finish({2, 1}, 1));
  t.finish_held({1, 1});
  CHECK(t.complete());
}

TEST_CASE("ranges: a run taken with an alignment ends on a multiple of it, or takes what is left", "[range_table]") {
  RangeTable t(20);
  CHECK(t.take(1, 5, 4) == ChunkRange{0, 4});   // cut back to 4
  CHECK(t.take(1, 2, 4) == ChunkRange{4, 4});   // taken on to 8: cutting back leaves nothing
  CHECK(t.take(1, 100, 4) == ChunkRange{8, 12});  // all that is left
  CHECK(t.requeue({8, 12}, 1, false));
  CHECK(t.take(2, 6, 4) == ChunkRange{8, 4});   // a re-queued range is cut the same way
}

TEST_CASE("ranges: a verify block held in pieces from two workers is settled as one range", "[range_table]") {
  RangeTable t(8);
  CHECK(t.take(1, 3) == ChunkRange{0, 3});
  CHECK(t.take(2, 5) == ChunkRange{3, 5});
  CHECK(t.hold({0, 3}, 1));
  CHECK_FALSE(t.hold({2, 2}, 2));  // chunk 2 is held already, not running on 2
  CHECK(t.hold({3, 1}, 2));
  CHECK(t.finish({4, 4}, 2));
  CHECK(t.held() == 4);
  CHECK(t.entries() == 2);
  CHECK(t.state(2) == ChunkState::kHeld);
  CHECK(t.state(4) == ChunkState::kDone);
  t.finish_held({0, 4});
  CHECK(t.held() == 0);
  CHECK(t.entries() == 0);
  CHECK(t.complete());
}

TEST_CASE("ranges: a job of 2^40 chunks costs a handful of entries", "[range_table]") {
  const uint64_t n = uint64_t{1} << 40;
  RangeTable t(n);
  const uint64_t step = uint64_t{1} << 34;
  for (uint64_t i = 0; i < n / step; ++i) {
    const ChunkRange r = t.take(WorkerId(i % 3 + 1), step);
    // Each range reported in four pieces, as a worker reports progress.
    for (uint64_t k = 0; k < 4; ++k) REQUIRE(t.finish({r.first + k * step / 4, step / 4}, WorkerId(i % 3 + 1)));
    CHECK(t.entries() == 0);
  }
  CHECK(t.complete());
  CHECK(t.done() == n);
}

// Random events against a model that keeps every chunk's state and worker; after each event the
// table must agree chunk by chunk, and every chunk is done at most once. At the end everything is
// finished, and the exact sum merged range by range has the same bits as the per-chunk sum.
TEST_CASE("ranges: random event sequences count every chunk exactly once", "[range_table][property]") {
  std::mt19937_64 rng(20261125);
  auto below = [&](uint64_t n) { return n == 0 ? 0 : std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  // A value per chunk whose float sum depends on order (big and small magnitudes mixed).
  auto value = [](uint64_t c) { return (c % 7 == 0 ? 1e16 : 0.1) * (c % 2 ? -1.0 : 1.0) + double(c) * 0.3; };
  for (int round = 0; round < 300; ++round) {
    const uint64_t n = 1 + below(round < 250 ? 120 : 3000);
    RangeTable t(n);
    struct Chunk {
      ChunkState state = ChunkState::kQueued;
      WorkerId worker = 0;
      int done_times = 0;
    };
    std::vector<Chunk> model(n);
    std::vector<ChunkRange> held_pieces;  // held and not settled yet
    ExactSum by_range;
    auto finish_model = [&](ChunkRange r) {
      ExactSum part;
      for (uint64_t c = r.first; c < r.end(); ++c) {
        model[c].state = ChunkState::kDone;
        ++model[c].done_times;
        part.add(value(c));
      }
      part.normalize();
      by_range.add(part);
      by_range.normalize();
    };
    // A random piece of a random running range of `w` (nullopt when it runs nothing).
    auto piece_of = [&](WorkerId w) -> std::optional<ChunkRange> {
      const auto runs = t.running_of(w);
      if (runs.empty()) return std::nullopt;
      const ChunkRange r = runs[below(runs.size())];
      const uint64_t first = r.first + below(r.count);
      return ChunkRange{first, 1 + below(r.end() - first)};
    };
    for (int step = 0; step < 400; ++step) {
      const WorkerId w = WorkerId(1 + below(4));
      switch (below(8)) {
        case 0:
        case 1:
          if (t.has_ordinary()) {
            const ChunkRange r = t.take(w, 1 + below(40));
            for (uint64_t c = r.first; c < r.end(); ++c) {
              REQUIRE(model[c].state == ChunkState::kQueued);
              model[c] = {ChunkState::kRunning, w, model[c].done_times};
            }
          }
          break;
        case 2:
          if (t.has_suspects()) {
            const ChunkRange r = t.take_suspect(w, 1 + below(4));
            for (uint64_t c = r.first; c < r.end(); ++c) {
              REQUIRE(model[c].state == ChunkState::kSuspect);
              model[c] = {ChunkState::kRunning, w, model[c].done_times};
            }
          }
          break;
        case 3:
        case 4:
          if (auto p = piece_of(w)) {
            REQUIRE(t.finish(*p, w));
            finish_model(*p);
          }
          break;
        case 5:
          if (auto p = piece_of(w)) {  // failed, or lost
            const bool suspect = below(3) == 0;
            REQUIRE(t.requeue(*p, w, suspect));
            for (uint64_t c = p->first; c < p->end(); ++c)
              model[c].state = suspect ? ChunkState::kSuspect : ChunkState::kQueued;
          }
          break;
        case 6:
          if (auto p = piece_of(w)) {  // a verify draw: held, then settled
            REQUIRE(t.hold(*p, w));
            for (uint64_t c = p->first; c < p->end(); ++c) model[c].state = ChunkState::kHeld;
            if (below(2) == 0) {
              t.finish_held(*p);
              finish_model(*p);
            } else {
              held_pieces.push_back(*p);
            }
          }
          break;
        case 7: {  // the worker is lost: everything it runs goes back
          for (const ChunkRange& r : t.running_of(w)) {
            REQUIRE(t.requeue(r, w, false));
            for (uint64_t c = r.first; c < r.end(); ++c) model[c].state = ChunkState::kQueued;
          }
          // A result from a worker that does not hold the range changes nothing.
          const ChunkRange any{below(n), 1};
          if (model[any.first].state != ChunkState::kRunning || model[any.first].worker != w) {
            CHECK_FALSE(t.finish(any, w));
          }
          break;
        }
      }
      uint64_t done = 0, running = 0, held = 0, queued = 0;
      for (uint64_t c = 0; c < n; ++c) {
        REQUIRE(model[c].done_times <= 1);
        REQUIRE(t.state(c) == model[c].state);
        if (model[c].state == ChunkState::kRunning) REQUIRE(t.running_on(c) == model[c].worker);
        done += model[c].state == ChunkState::kDone;
        running += model[c].state == ChunkState::kRunning;
        held += model[c].state == ChunkState::kHeld;
        queued += model[c].state == ChunkState::kQueued || model[c].state == ChunkState::kSuspect;
      }
      REQUIRE(t.done() == done);
      REQUIRE(t.running() == running);
      REQUIRE(t.held() == held);
      REQUIRE(t.queued() == queued);
    }
    // Drain: settle what is held, finish what runs, then run everything queued.
    for (const ChunkRange& p : held_pieces) {
      t.finish_held(p);
      finish_model(p);
    }
    for (WorkerId w = 1; w <= 4; ++w)
      for (const ChunkRange& r : t.running_of(w)) {
        REQUIRE(t.finish(r, w));
        finish_model(r);
      }
    while (t.has_suspects()) {
      const ChunkRange r = t.take_suspect(9, UINT64_MAX);
      REQUIRE(t.finish(r, 9));
      finish_model(r);
    }
    while (t.has_ordinary()) {
      const ChunkRange r = t.take(9, 1 + below(100));
      REQUIRE(t.finish(r, 9));
      finish_model(r);
    }
    REQUIRE(t.complete());
    REQUIRE(t.entries() == 0);
    ExactSum per_chunk;
    for (uint64_t c = 0; c < n; ++c) {
      REQUIRE(model[c].done_times == 1);
      per_chunk.add(value(c));
    }
    per_chunk.normalize();
    REQUIRE(same_value(by_range, per_chunk));
    REQUIRE(std::bit_cast<uint64_t>(by_range.rounded()) == std::bit_cast<uint64_t>(per_chunk.rounded()));
  }
}

TEST_CASE("ranges: chunks given back unstarted are queued again, first, and are no retries", "[range_table]") {
  RangeTable t(10);
  CHECK(t.take(1, 10) == ChunkRange{0, 10});
  CHECK_FALSE(t.give_back({5, 5}, 2));  // not running on worker 2: nothing changes
  CHECK(t.give_back({5, 5}, 1));
  CHECK(t.requeued_total() == 0);
  CHECK(t.given_back_total() == 5);
  CHECK(t.state(5) == ChunkState::kQueued);
  CHECK(t.running_on(4) == WorkerId{1});
  CHECK(t.take(2, 10) == ChunkRange{5, 5});
  CHECK(t.finish({0, 5}, 1));
  CHECK(t.finish({5, 5}, 2));
  CHECK(t.complete());
}
