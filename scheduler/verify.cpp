#include "scheduler/verify.h"

#include <algorithm>

#include "core/check.h"

namespace psched {

namespace {

// splitmix64's finaliser: every input bit moves every output bit, so neighbouring chunks draw
// independently.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::vector<WorkerId> workers_of(const std::vector<VerifyCopy>& copies) {
  std::vector<WorkerId> out;
  for (const VerifyCopy& c : copies) out.push_back(c.worker);
  return out;
}

}  // namespace

bool verify_drawn(uint64_t seed, uint64_t chunk, double fraction) {
  if (!(fraction > 0)) return false;
  if (fraction >= 1) return true;
  const uint64_t h = mix(mix(seed + 0x9e3779b97f4a7c15ULL) ^ chunk);
  return double(h >> 11) * 0x1p-53 < fraction;
}

void ChunkVerifier::move(Pending& p, NextCopy to, WorkerId worker) {
  const bool legal = to == NextCopy::kRunning ? p.next == NextCopy::kQueued
                                              : p.next == NextCopy::kRunning;
  PSCHED_ASSERT(legal, int(p.next), int(to), worker);
  p.next = to;
  p.running_on = to == NextCopy::kRunning ? worker : 0;
}

void ChunkVerifier::first_copy(uint64_t chunk, VerifyCopy copy) {
  PSCHED_REQUIRE(pending_.count(chunk) == 0, chunk);
  Pending& p = pending_[chunk];  // born queued: its second copy is queued below
  p.copies.push_back(std::move(copy));
  enqueue(chunk, p, /*front=*/false);
}

// Puts a queued copy in its queue; the caller has moved it to (or created it) kQueued.
void ChunkVerifier::enqueue(uint64_t chunk, Pending& p, bool front) {
  PSCHED_ASSERT(p.next == NextCopy::kQueued, chunk, int(p.next));
  std::deque<uint64_t>& q = p.copies.size() == 1 ? second_by_first_[p.copies[0].worker] : third_;
  if (front) {
    q.push_front(chunk);
  } else {
    q.push_back(chunk);
  }
  ++queued_;
}

uint64_t ChunkVerifier::take(WorkerId worker, uint64_t max, const SomeoneElse& someone_else,
                             std::vector<uint64_t>& out) {
  uint64_t n = 0;
  auto take_one = [&](uint64_t chunk) {
    move(must_find(pending_, chunk), NextCopy::kRunning, worker);
    out.push_back(chunk);
    --queued_;
    ++n;
  };
  for (auto it = second_by_first_.begin(); it != second_by_first_.end() && n < max;) {
    if (it->first == worker && someone_else({worker})) {
      ++it;
      continue;
    }
    std::deque<uint64_t>& q = it->second;
    for (; !q.empty() && n < max; q.pop_front()) take_one(q.front());
    it = q.empty() ? second_by_first_.erase(it) : std::next(it);
  }
  for (auto it = third_.begin(); it != third_.end() && n < max;) {
    const std::vector<WorkerId> done_by = workers_of(must_find(pending_, *it).copies);
    if (std::find(done_by.begin(), done_by.end(), worker) != done_by.end() && someone_else(done_by)) {
      ++it;
      continue;
    }
    take_one(*it);
    it = third_.erase(it);
  }
  return n;
}

std::optional<WorkerId> ChunkVerifier::running_on(uint64_t chunk) const {
  auto it = pending_.find(chunk);
  if (it == pending_.end() || it->second.next != NextCopy::kRunning) return std::nullopt;
  return it->second.running_on;
}

std::vector<uint64_t> ChunkVerifier::running_chunks_of(WorkerId worker) const {
  std::vector<uint64_t> out;
  for (const auto& [chunk, p] : pending_)
    if (running_there(p, worker)) out.push_back(chunk);
  return out;
}

uint32_t ChunkVerifier::requeue(uint64_t chunk, WorkerId worker, const std::string& worker_name,
                                bool blame) {
  auto it = pending_.find(chunk);
  if (it == pending_.end() || !running_there(it->second, worker)) return 0;
  Pending& p = it->second;
  move(p, NextCopy::kQueued);
  if (blame) p.failed_on.push_back(worker_name);
  enqueue(chunk, p, /*front=*/true);
  return uint32_t(p.failed_on.size());
}

const std::vector<std::string>& ChunkVerifier::failed_on(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  auto it = pending_.find(chunk);
  return it == pending_.end() ? kNone : it->second.failed_on;
}

const VerifyMismatch& ChunkVerifier::record_mismatch(uint64_t chunk, std::vector<VerifyCopy> copies) {
  ++mismatch_count_;
  VerifyMismatch& m = mismatches_.size() < kMaxReportedMismatches ? mismatches_.emplace_back()
                                                                  : last_mismatch_;
  m.chunk = chunk;
  m.copies = std::move(copies);
  return m;
}

std::optional<PartialSum> ChunkVerifier::copy_done(uint64_t chunk, VerifyCopy copy,
                                                   const SomeoneElse& someone_else,
                                                   const VerifyMismatch** mismatch) {
  *mismatch = nullptr;
  auto it = pending_.find(chunk);
  PSCHED_REQUIRE(it != pending_.end() && running_there(it->second, copy.worker), chunk, copy.worker);
  Pending& p = it->second;
  p.copies.push_back(std::move(copy));
  std::vector<VerifyCopy>& c = p.copies;
  PartialSum keep = c[0].partial;
  if (c.size() == 2) {
    if (!same_bits(c[0].partial, c[1].partial)) {
      if (someone_else(workers_of(c))) {  // a third worker breaks the tie
        move(p, NextCopy::kQueued);
        enqueue(chunk, p, /*front=*/true);
        return std::nullopt;
      }
      c[0].suspect = c[1].suspect = true;  // no majority: both are suspects, the first copy counts
      *mismatch = &record_mismatch(chunk, c);
    }
  } else {
    PSCHED_ASSERT(c.size() == 3, chunk, c.size());
    if (same_bits(c[2].partial, c[0].partial)) {
      c[1].suspect = true;
    } else if (same_bits(c[2].partial, c[1].partial)) {
      c[0].suspect = true;
      keep = c[1].partial;
    } else {
      c[0].suspect = c[1].suspect = c[2].suspect = true;
    }
    *mismatch = &record_mismatch(chunk, c);
  }
  ++verified_;
  if (std::all_of(c.begin(), c.end(), [&](const VerifyCopy& x) { return x.worker == c[0].worker; }))
    ++same_worker_;
  move(p, NextCopy::kSettled);
  pending_.erase(it);
  return keep;
}

}  // namespace psched
