#include "scheduler/verify.h"

#include <algorithm>
#include <bit>

#include "core/check.h"

namespace psched {

namespace {

// splitmix64's finaliser: every input bit moves every output bit, so neighbouring blocks draw
// independently.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

bool has(const std::vector<WorkerId>& workers, WorkerId w) {
  return std::find(workers.begin(), workers.end(), w) != workers.end();
}

void add_name(std::string& names, const std::string& name) {
  if (name.empty() || names == name || names.find(name + ", ") == 0 || names.find(", " + name) != std::string::npos)
    return;
  names += names.empty() ? name : ", " + name;
}

}  // namespace

uint64_t verify_block_chunks(uint64_t chunks, uint64_t chunk_elements) {
  const uint64_t elements = std::max<uint64_t>(chunk_elements, 1);
  const uint64_t by_elements =
      elements >= kVerifyBlockElements ? 1 : std::bit_ceil((kVerifyBlockElements + elements - 1) / elements);
  const uint64_t by_count = std::bit_floor(std::max<uint64_t>(chunks / kVerifyMinBlocks, 1));
  return std::min(by_elements, by_count);
}

bool verify_drawn(uint64_t seed, uint64_t block, double fraction) {
  if (!(fraction > 0)) return false;
  if (fraction >= 1) return true;
  const uint64_t h = mix(mix(seed + 0x9e3779b97f4a7c15ULL) ^ block);
  return double(h >> 11) * 0x1p-53 < fraction;
}

BlockVerifier::BlockVerifier(double fraction, uint64_t seed, uint64_t chunks, uint64_t block_chunks)
    : fraction_(fraction), seed_(seed), chunks_(chunks), block_(std::max<uint64_t>(block_chunks, 1)) {}

ChunkRange BlockVerifier::block_of(uint64_t chunk) const {
  const uint64_t first = chunk / block_ * block_;
  return ChunkRange{first, std::min(block_, chunks_ - first)};
}

void BlockVerifier::Copy::add(ChunkRange r, VerifyCopy piece) {
  chunks += r.count;
  merge(partial, piece.partial);
  ranges.push_back(r);
  pieces.push_back(std::move(piece));
}

VerifyCopy BlockVerifier::Copy::whole() const {
  VerifyCopy c;
  if (!pieces.empty()) c.worker = pieces.front().worker;
  for (const VerifyCopy& p : pieces) {
    add_name(c.worker_name, p.worker_name);
    add_name(c.device_name, p.device_name);
  }
  c.partial = partial;
  return c;
}

// Whether `f` holds for a worker of one of the block's copies: the first copy's pieces, then the
// copies after it (copies[0] is the first copy, whole).
template <typename F>
bool BlockVerifier::any_worker(const HeldBlock& p, F&& f) {
  for (const VerifyCopy& piece : p.first.pieces)
    if (f(piece.worker)) return true;
  for (size_t i = 1; i < p.copies.size(); ++i)
    if (f(p.copies[i].worker)) return true;
  return false;
}

std::vector<WorkerId> BlockVerifier::workers_of(const HeldBlock& p) {
  std::vector<WorkerId> out;
  any_worker(p, [&](WorkerId w) {
    if (!has(out, w)) out.push_back(w);
    return false;
  });
  return out;
}

bool BlockVerifier::computed_by(const HeldBlock& p, WorkerId worker) {
  return any_worker(p, [&](WorkerId w) { return w == worker; });
}

// The one place a block's phase changes; what each phase implies is checked on entering it.
void BlockVerifier::move(HeldBlock& p, Phase to) {
  const Phase from = p.phase;
  const bool queued = std::any_of(p.tasks.begin(), p.tasks.end(), [](const Task& t) { return t.state == State::kQueued; });
  bool legal = false;
  switch (to) {
    case Phase::kCopies:
      legal = from == Phase::kFirstCopy && p.first.chunks == p.block.count && p.copies.size() == 1;
      break;
    case Phase::kNarrowing:
      legal = from == Phase::kCopies && p.mismatch && p.search && p.search->phase() == BlockSearch::Phase::kNew;
      break;
    case Phase::kDecided:
      legal = (from == Phase::kCopies || from == Phase::kNarrowing) && !queued && !p.search;
      break;
    case Phase::kSettled:
      legal = from == Phase::kDecided && p.tasks.empty();
      break;
    case Phase::kFirstCopy:
      break;
  }
  PSCHED_ASSERT(legal && p.listed.has_value() == queued, int(from), int(to), p.block.first, p.tasks.size(), queued);
  p.phase = to;
}

// The one place a task's state changes: kNew -> kQueued -> kRunning -> kDone, kRunning -> kQueued
// (its worker left), kQueued -> kDone (dropped). Keeps queued_ and the block's place in queue_.
BlockVerifier::Tasks::iterator BlockVerifier::move_task(HeldBlock& p, Tasks::iterator t, State to, WorkerId worker,
                                                        bool front) {
  const State from = t->state;
  const bool searching = t->kind == Kind::kBlock ? p.phase == Phase::kCopies : p.phase == Phase::kNarrowing;
  bool legal = false;
  switch (to) {
    case State::kQueued:
      legal = (from == State::kNew || from == State::kRunning) && searching;
      queued_ += t->range.count;
      t->worker = 0;
      t->got = Copy{};
      break;
    case State::kRunning:
      legal = from == State::kQueued && searching && worker != 0;
      queued_ -= t->range.count;
      t->worker = worker;
      break;
    case State::kDone:
      legal = from == State::kQueued || from == State::kRunning;
      if (from == State::kQueued) queued_ -= t->range.count;
      break;
    case State::kNew:
      break;
  }
  PSCHED_ASSERT(legal, int(from), int(to), int(t->kind), int(p.phase), t->range.first, t->range.count);
  t->state = to;
  auto next = std::next(t);
  if (to == State::kDone) next = p.tasks.erase(t);
  // queue_ lists the block exactly while it has a queued task.
  const bool queued = std::any_of(p.tasks.begin(), p.tasks.end(), [](const Task& x) { return x.state == State::kQueued; });
  if (!queued && p.listed) {
    queue_.erase(*p.listed);
    p.listed.reset();
  } else if (queued && !p.listed) {
    p.listed = front ? queue_.insert(queue_.begin(), p.block.first / block_) : queue_.insert(queue_.end(), p.block.first / block_);
  } else if (queued && front && to == State::kQueued) {
    queue_.splice(queue_.begin(), queue_, *p.listed);  // a copy sent back goes out first
  }
  return next;
}

void BlockVerifier::first_piece(ChunkRange range, VerifyCopy copy) {
  const uint64_t block = range.first / block_;
  auto [it, fresh] = held_.try_emplace(block);
  HeldBlock& p = it->second;
  if (fresh) p.block = block_of(range.first);
  PSCHED_REQUIRE(range.count > 0 && range.end() <= p.block.end() && p.phase == Phase::kFirstCopy, range.first,
                 range.count, p.block.first);
  p.first.add(range, std::move(copy));
  PSCHED_ASSERT(p.first.chunks <= p.block.count, p.first.chunks, p.block.count);
  if (p.first.chunks < p.block.count) return;
  p.copies.push_back(p.first.whole());
  move(p, Phase::kCopies);
  queue(p, Kind::kBlock, p.block, 0, /*front=*/false);
}

void BlockVerifier::queue(HeldBlock& p, Kind kind, ChunkRange range, WorkerId pinned, bool front) {
  p.tasks.push_back(Task{kind, range, pinned, State::kNew, 0, {}});
  move_task(p, std::prev(p.tasks.end()), State::kQueued, 0, front);
}

bool BlockVerifier::may_take(const HeldBlock& p, const Task& t, WorkerId worker, const VerifyPeers& peers) const {
  switch (t.kind) {
    case Kind::kBlock:
      return !computed_by(p, worker) || !peers.someone_else(workers_of(p));
    case Kind::kSuspect:
      return worker == t.pinned;
    case Kind::kOther:
      return worker != p.search->suspect();
  }
  return false;
}

uint64_t BlockVerifier::take(WorkerId worker, uint64_t max, const VerifyPeers& peers, std::vector<ChunkRange>& out) {
  uint64_t n = 0;
  for (auto it = queue_.begin(); it != queue_.end() && n < max;) {
    HeldBlock& p = must_find(held_, *it);
    ++it;  // taking its last queued task takes the block out of queue_
    for (auto t = p.tasks.begin(); t != p.tasks.end(); ++t) {
      if (t->state != State::kQueued || (n > 0 && n + t->range.count > max) || !may_take(p, *t, worker, peers))
        continue;
      n += t->range.count;
      out.push_back(t->range);
      move_task(p, t, State::kRunning, worker);
    }
  }
  return n;
}

BlockVerifier::Tasks::const_iterator BlockVerifier::running_task(const HeldBlock& p, ChunkRange r, WorkerId worker) {
  return std::find_if(p.tasks.begin(), p.tasks.end(), [&](const Task& t) {
    return t.state == State::kRunning && t.worker == worker && r.first >= t.range.first && r.end() <= t.range.end();
  });
}

bool BlockVerifier::running_here(ChunkRange r, WorkerId worker) const {
  auto it = held_.find(r.first / block_);
  return r.count > 0 && it != held_.end() && running_task(it->second, r, worker) != it->second.tasks.end();
}

std::vector<ChunkRange> BlockVerifier::running_of(WorkerId worker) const {
  std::vector<ChunkRange> out;
  for (const auto& [block, p] : held_)
    for (const Task& t : p.tasks)
      if (t.state == State::kRunning && t.worker == worker) out.push_back(t.range);
  return out;
}

uint64_t BlockVerifier::awaited_from(WorkerId worker) const {
  uint64_t n = 0;
  for (const auto& [block, p] : held_)
    for (const Task& t : p.tasks)
      if (t.state == State::kRunning && t.worker == worker) n += t.range.count - t.got.chunks;
  return n;
}

// The running copy on `worker` that `r` belongs to takes `in` (a piece or a failed chunk); once all
// its chunks are in it is done, and what that means for the block is returned.
template <typename TakeIn>
std::optional<VerifySettled> BlockVerifier::account(ChunkRange r, WorkerId worker, const VerifyPeers& peers,
                                                    TakeIn&& in) {
  const uint64_t block = r.first / block_;
  HeldBlock& p = must_find(held_, block);
  const auto found = running_task(p, r, worker);
  PSCHED_REQUIRE(found != p.tasks.end(), r.first, r.count, worker);
  const auto t = p.tasks.erase(found, found);  // the same task, mutable
  in(p, t->got);
  if (t->got.chunks < t->range.count) return std::nullopt;
  const Task done = *t;
  move_task(p, t, State::kDone);
  task_done(p, done, peers);
  return settle_if_idle(block);
}

std::optional<VerifySettled> BlockVerifier::piece_done(ChunkRange r, VerifyCopy copy, const VerifyPeers& peers) {
  const WorkerId worker = copy.worker;
  return account(r, worker, peers, [&](HeldBlock&, Copy& got) { got.add(r, std::move(copy)); });
}

uint32_t BlockVerifier::chunk_failed(uint64_t chunk, WorkerId worker, const std::string& worker_name,
                                     const VerifyPeers& peers, std::optional<VerifySettled>& settled) {
  uint32_t failures = 0;
  settled = account(ChunkRange{chunk, 1}, worker, peers, [&](HeldBlock& p, Copy& got) {
    p.failed_on.push_back(worker_name);
    failures = ++p.shown;
    got.failed = true;
    ++got.chunks;
  });
  return failures;
}

void BlockVerifier::worker_gone(WorkerId worker, const std::string& worker_name, bool blame, bool counted, uint32_t limit,
                                const VerifyPeers& peers, std::vector<ChunkRange>& at_limit,
                                std::vector<VerifySettled>& settled) {
  std::vector<uint64_t> touched;
  for (auto& [block, p] : held_) {
    bool requeued = false, dropped = false;
    for (auto t = p.tasks.begin(); t != p.tasks.end();) {
      if (t->state != State::kRunning || t->worker != worker) {
        ++t;
      } else if (p.phase == Phase::kDecided || t->kind == Kind::kSuspect) {
        t = move_task(p, t, State::kDone);  // no longer needed, or only it could compute it
        dropped = true;
      } else {  // a block's copy, or a search step on another worker: to someone else
        move_task(p, t++, State::kQueued, 0, /*front=*/true);
        requeued = true;
      }
    }
    if (requeued && blame) {
      p.failed_on.push_back(worker_name);
      p.shown += counted ? 1 : 0;
      if (p.shown >= limit || p.failed_on.size() >= uint64_t{kLostBeside} * limit) at_limit.push_back(p.block);
    }
    if (p.phase == Phase::kNarrowing)
      if (const std::optional<VerifySearch> why = p.search->stops_without(worker, peers)) end_search(p, *why);
    if (dropped || p.phase == Phase::kDecided) touched.push_back(block);
  }
  for (const uint64_t block : touched)
    if (auto s = settle_if_idle(block)) settled.push_back(*s);
}

// The mismatch names the smallest range the search knew, and why it stopped; steps still running
// finish, and their results change nothing.
void BlockVerifier::end_search(HeldBlock& p, VerifySearch why) {
  for (auto t = p.tasks.begin(); t != p.tasks.end();)
    t = t->state == State::kQueued ? move_task(p, t, State::kDone) : std::next(t);
  p.search.reset();
  p.mismatch->search = why;
  move(p, Phase::kDecided);
}

void BlockVerifier::follow(HeldBlock& p, BlockSearch::Next next) {
  if (next.found) {
    p.mismatch->chunks = next.found->chunk;
    p.mismatch->copies = {std::move(next.found->odd), std::move(next.found->other)};
  }
  if (next.ended) {
    end_search(p, *next.ended);
    return;
  }
  for (const BlockSearch::Step& step : next.steps)
    queue(p, step.on_suspect ? Kind::kSuspect : Kind::kOther, step.range, step.on_suspect ? p.search->suspect() : 0,
          /*front=*/true);
}

void BlockVerifier::task_done(HeldBlock& p, const Task& task, const VerifyPeers& peers) {
  if (p.phase == Phase::kDecided) return;  // a step of a search that ended: its result changes nothing
  if (task.got.failed) {
    if (task.kind == Kind::kBlock) {  // runs again, on another worker if there is one
      queue(p, Kind::kBlock, task.range, 0, /*front=*/true);
    } else {
      end_search(p, VerifySearch::kStepFailed);
    }
    return;
  }
  if (task.kind == Kind::kBlock) {
    p.copies.push_back(task.got.whole());
    decide(p, peers);
    return;
  }
  PSCHED_ASSERT(p.phase == Phase::kNarrowing && p.search, int(p.phase), p.block.first);
  follow(p, p.search->step_done(task.kind == Kind::kSuspect, task.got.whole(), peers));
}

void BlockVerifier::decide(HeldBlock& p, const VerifyPeers& peers) {
  std::vector<VerifyCopy>& c = p.copies;
  size_t odd = c.size();  // the one copy against a majority, if any
  bool majority = false;
  if (c.size() == 2) {
    p.keep = c[0].partial;
    if (same_bits(c[0].partial, c[1].partial)) {
      move(p, Phase::kDecided);
      return;
    }
    if (peers.someone_else(workers_of(p))) {  // a third worker breaks the tie
      queue(p, Kind::kBlock, p.block, 0, /*front=*/true);
      return;
    }
    c[0].suspect = c[1].suspect = true;  // no majority: both are suspects, the first copy counts
    odd = 1;                             // search where the second differs from the first
  } else {
    PSCHED_ASSERT(c.size() == 3, p.block.first, c.size());
    p.keep = c[0].partial;
    const bool third_apart = c[2].worker != c[1].worker &&
                             std::none_of(p.first.pieces.begin(), p.first.pieces.end(),
                                          [&](const VerifyCopy& x) { return x.worker == c[2].worker; });
    if (!third_apart) {
      // The third copy ran where one of the others did (no one else was left): no majority.
      c[0].suspect = c[1].suspect = true;
      odd = 1;
    } else if (same_bits(c[2].partial, c[0].partial)) {
      odd = 1;
    } else if (same_bits(c[2].partial, c[1].partial)) {
      odd = 0;
      p.keep = c[1].partial;
    } else {
      c[0].suspect = c[1].suspect = c[2].suspect = true;
    }
    majority = odd < c.size() && !c[0].suspect;
    if (odd < c.size()) c[odd].suspect = true;
  }
  p.mismatch = VerifyMismatch{p.block, c, odd == c.size() ? VerifySearch::kNoMajority : VerifySearch::kFound};
  if (odd == c.size() || p.block.count == 1) {
    move(p, Phase::kDecided);
    return;
  }
  // Narrow it down: the odd copy's pieces, each against the others' partial.
  std::vector<std::pair<ChunkRange, VerifyCopy>> pieces;
  if (odd == 0) {
    for (size_t i = 0; i < p.first.pieces.size(); ++i) pieces.emplace_back(p.first.ranges[i], p.first.pieces[i]);
  } else {
    pieces.emplace_back(p.block, c[odd]);
  }
  p.search.emplace(p.block, odd == 0 ? c[1].partial : c[0].partial, majority, std::move(pieces));
  move(p, Phase::kNarrowing);
  follow(p, p.search->start(peers));
}

std::optional<VerifySettled> BlockVerifier::settle_if_idle(uint64_t block) {
  auto it = held_.find(block);
  PSCHED_ASSERT(it != held_.end(), block);
  HeldBlock& p = it->second;
  if (p.phase != Phase::kDecided || !p.tasks.empty()) return std::nullopt;
  move(p, Phase::kSettled);
  VerifySettled s;
  s.block = p.block;
  s.keep = p.keep;
  s.credit = p.copies.front().worker;
  verified_ += p.block.count;
  const std::vector<WorkerId> by = workers_of(p);
  if (by.size() == 1) same_worker_ += p.block.count;
  if (p.mismatch) {
    ++mismatch_count_;
    VerifyMismatch& m = mismatches_.size() < kMaxReportedMismatches ? mismatches_.emplace_back() : last_mismatch_;
    m = std::move(*p.mismatch);
    s.mismatch = &m;
  }
  held_.erase(it);
  return s;
}

const std::vector<std::string>& BlockVerifier::failed_on(uint64_t chunk) const {
  static const std::vector<std::string> kNone;
  auto it = held_.find(chunk / block_);
  return it == held_.end() ? kNone : it->second.failed_on;
}

uint32_t BlockVerifier::failures(uint64_t chunk) const {
  auto it = held_.find(chunk / block_);
  return it == held_.end() ? 0 : it->second.shown;
}

}  // namespace psched
