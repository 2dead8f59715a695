// A stand-in cluster for the verifier's tests (verify_test.cpp, verify_search_test.cpp): workers
// that compute chunk ranges (one of them, if told, a chunk wrong), and the checks both property
// tests make of what settled.
#pragma once

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "scheduler/verify.h"

namespace psched::test {

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
    return VerifyCopy{w, fmt::format("w{}", w), "cpu", compute(r, w), false};
  }
};

// Takes what `worker` may take (up to `max` chunks); returns the ranges.
inline std::vector<ChunkRange> take(BlockVerifier& v, const Cluster& c, WorkerId worker, uint64_t max = 1000) {
  std::vector<ChunkRange> out;
  v.take(worker, max, c.peers(), out);
  return out;
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
inline void check_settled_once(const BlockVerifier& v, const Cluster& c, uint64_t chunks,
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
    const std::string bad_name = fmt::format("w{}", c.bad);
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

}  // namespace psched::test
