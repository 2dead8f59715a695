#include "scheduler/range_table.h"

#include <algorithm>
#include <iterator>

#include "core/check.h"

namespace psched {

void RangeTable::move(ChunkRange r, ChunkState from, ChunkState to, WorkerId worker) {
  PSCHED_ASSERT(r.count > 0 && r.end() <= chunks_ && r.end() > r.first, r.first, r.count, chunks_);
  switch (from) {
    case ChunkState::kQueued:
    case ChunkState::kSuspect:
      PSCHED_ASSERT(to == ChunkState::kRunning, int(from), int(to), r.first);
      break;
    case ChunkState::kRunning:
      PSCHED_ASSERT(to != ChunkState::kRunning && running_here(r, worker), int(to), r.first, r.count,
                    worker);
      remove_running(r);
      break;
    case ChunkState::kHeld:
      PSCHED_ASSERT(to == ChunkState::kDone, int(to), r.first, r.count);
      remove_held(r);
      break;
    case ChunkState::kDone:
      PSCHED_ASSERT(false, "a done chunk never changes", r.first, r.count);
  }
  switch (to) {
    case ChunkState::kQueued:
      requeued_.push_back(r);
      requeued_count_ += r.count;
      break;
    case ChunkState::kSuspect:
      suspects_.push_back(r);
      suspect_count_ += r.count;
      break;
    case ChunkState::kRunning:
      add_running(r, worker);
      break;
    case ChunkState::kHeld:
      PSCHED_ASSERT(held_.emplace(r.first, r.end()).second, r.first, r.count);
      held_count_ += r.count;
      break;
    case ChunkState::kDone:
      done_ += r.count;
      break;
  }
}

void RangeTable::add_running(ChunkRange r, WorkerId worker) {
  auto [it, inserted] = running_.emplace(r.first, Run{r.end(), worker});
  PSCHED_ASSERT(inserted, r.first);
  running_count_ += r.count;
  // A worker's adjacent runs become one entry, so a window of consecutive ranges stays one entry.
  if (auto next = std::next(it); next != running_.end() && next->first == r.end() &&
                                 next->second.worker == worker) {
    it->second.end = next->second.end;
    running_.erase(next);
  }
  if (it != running_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end == it->first && prev->second.worker == worker) {
      prev->second.end = it->second.end;
      running_.erase(it);
    }
  }
}

void RangeTable::remove_running(ChunkRange r) {
  // The entry holding r.first, cut so that an entry starts at r.first and one at r.end().
  auto it = std::prev(running_.upper_bound(r.first));
  if (it->first < r.first) {
    const Run tail{it->second.end, it->second.worker};
    it->second.end = r.first;
    it = running_.emplace_hint(std::next(it), r.first, tail);
  }
  while (it != running_.end() && it->first < r.end()) {
    if (it->second.end > r.end()) {
      running_.emplace_hint(std::next(it), r.end(), Run{it->second.end, it->second.worker});
    }
    it = running_.erase(it);
  }
  running_count_ -= r.count;
}

namespace {

// How many of the `available` chunks from `first` a run of at most `max` takes, ending on a
// multiple of `align` where it can: cut back to one, or, when that leaves nothing, taken on to one.
uint64_t aligned_count(uint64_t first, uint64_t available, uint64_t max, uint64_t align) {
  const uint64_t n = std::min(available, max);
  if (align <= 1 || n == available) return n;
  const uint64_t end = first + n, down = end / align * align;
  if (down > first) return down - first;
  return std::min(available, (end / align + 1) * align - first);
}

}  // namespace

ChunkRange RangeTable::take(WorkerId worker, uint64_t max, uint64_t align, bool fresh_only) {
  PSCHED_REQUIRE((fresh_only ? has_fresh() : has_ordinary()) && max > 0, max, fresh_only);
  ChunkRange r;
  if (!requeued_.empty() && !fresh_only) {
    ChunkRange& front = requeued_.front();
    r = ChunkRange{front.first, aligned_count(front.first, front.count, max, align)};
    front.first += r.count;
    front.count -= r.count;
    if (front.count == 0) requeued_.pop_front();
    requeued_count_ -= r.count;
  } else {
    r = ChunkRange{next_fresh_, aligned_count(next_fresh_, chunks_ - next_fresh_, max, align)};
    next_fresh_ += r.count;
  }
  move(r, ChunkState::kQueued, ChunkState::kRunning, worker);
  return r;
}

ChunkRange RangeTable::take_suspect(WorkerId worker, uint64_t max) {
  PSCHED_REQUIRE(has_suspects() && max > 0);
  ChunkRange& oldest = suspects_.front();
  const ChunkRange r{oldest.first, std::min(max, oldest.count)};
  oldest.first += r.count;
  if ((oldest.count -= r.count) == 0) suspects_.pop_front();
  suspect_count_ -= r.count;
  move(r, ChunkState::kSuspect, ChunkState::kRunning, worker);
  return r;
}

bool RangeTable::give_back(ChunkRange r, WorkerId worker) {
  if (!running_here(r, worker)) return false;
  move(r, ChunkState::kRunning, ChunkState::kQueued, worker);
  given_back_total_ += r.count;  // never ran: not a retry
  return true;
}

bool RangeTable::finish(ChunkRange r, WorkerId worker) {
  if (!running_here(r, worker)) return false;
  move(r, ChunkState::kRunning, ChunkState::kDone, worker);
  return true;
}

bool RangeTable::hold(ChunkRange r, WorkerId worker) {
  if (!running_here(r, worker)) return false;
  move(r, ChunkState::kRunning, ChunkState::kHeld, worker);
  return true;
}

void RangeTable::finish_held(ChunkRange r) { move(r, ChunkState::kHeld, ChunkState::kDone, 0); }

// Held entries are the pieces held, each wholly inside one verify block: `r` must be exactly a
// run of them.
void RangeTable::remove_held(ChunkRange r) {
  uint64_t at = r.first;
  for (auto it = held_.find(r.first); at < r.end(); it = held_.erase(it)) {
    PSCHED_ASSERT(it != held_.end() && it->first == at && it->second <= r.end(), r.first, r.count, at);
    at = it->second;
  }
  held_count_ -= r.count;
}

bool RangeTable::requeue(ChunkRange r, WorkerId worker, bool suspect) {
  if (!running_here(r, worker)) return false;
  move(r, ChunkState::kRunning, suspect ? ChunkState::kSuspect : ChunkState::kQueued, worker);
  requeued_total_ += r.count;  // they ran (or started) and will run again
  return true;
}

bool RangeTable::running_here(ChunkRange r, WorkerId worker) const {
  if (r.count == 0 || r.first >= chunks_ || r.count > chunks_ - r.first) return false;
  auto it = running_.upper_bound(r.first);
  if (it == running_.begin()) return false;
  --it;
  // Entries are cut wherever a worker changes or a run ended, so `r` may span several.
  for (uint64_t at = r.first; at < r.end(); ++it) {
    if (it == running_.end() || it->first > at || it->second.end <= at || it->second.worker != worker)
      return false;
    at = it->second.end;
  }
  return true;
}

bool RangeTable::all_settled(ChunkRange r) const {
  if (r.count == 0 || r.first >= chunks_ || r.count > chunks_ - r.first) return false;
  if (r.end() > next_fresh_) return false;
  auto overlaps = [&](uint64_t first, uint64_t end) { return first < r.end() && r.first < end; };
  auto it = running_.upper_bound(r.first);
  if (it != running_.begin() && std::prev(it)->second.end > r.first) return false;
  if (it != running_.end() && it->first < r.end()) return false;
  for (const ChunkRange& q : requeued_)
    if (overlaps(q.first, q.end())) return false;
  for (const ChunkRange& q : suspects_)
    if (overlaps(q.first, q.end())) return false;
  return true;  // held chunks count as settled: their first copy is in
}

std::vector<ChunkRange> RangeTable::running_of(WorkerId worker) const {
  std::vector<ChunkRange> out;
  for (const auto& [first, run] : running_) {
    if (run.worker != worker) continue;
    if (!out.empty() && out.back().end() == first) {
      out.back().count += run.end - first;
    } else {
      out.push_back(ChunkRange{first, run.end - first});
    }
  }
  return out;
}

std::optional<WorkerId> RangeTable::running_on(uint64_t chunk) const {
  auto it = running_.upper_bound(chunk);
  if (it == running_.begin()) return std::nullopt;
  --it;
  if (it->second.end <= chunk) return std::nullopt;
  return it->second.worker;
}

ChunkState RangeTable::state(uint64_t chunk) const {
  PSCHED_REQUIRE(chunk < chunks_, chunk, chunks_);
  if (chunk >= next_fresh_) return ChunkState::kQueued;
  if (running_on(chunk)) return ChunkState::kRunning;
  if (auto h = held_.upper_bound(chunk); h != held_.begin() && std::prev(h)->second > chunk)
    return ChunkState::kHeld;
  for (const ChunkRange& q : requeued_)
    if (chunk >= q.first && chunk < q.end()) return ChunkState::kQueued;
  for (const ChunkRange& q : suspects_)
    if (chunk >= q.first && chunk < q.end()) return ChunkState::kSuspect;
  return ChunkState::kDone;
}

}  // namespace psched
