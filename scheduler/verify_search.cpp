#include "scheduler/verify_search.h"

#include "core/check.h"

namespace psched {

const char* verify_search_note(VerifySearch search) {
  switch (search) {
    case VerifySearch::kFound:
      return "";
    case VerifySearch::kNoMajority:
      return "three copies that all differ: no odd copy to search";
    case VerifySearch::kOddWorkerLeft:
      return "the search stopped: the odd copy's worker left";
    case VerifySearch::kNoOtherWorker:
      return "the search stopped: no other worker was left to compare with";
    case VerifySearch::kStepFailed:
      return "the search stopped: one of its steps failed";
    case VerifySearch::kNotReproduced:
      return "the search stopped: computed again, the odd copy's worker agreed (not deterministic?)";
  }
  return "";
}

BlockSearch::BlockSearch(ChunkRange block, PartialSum reference, bool majority,
                         std::vector<std::pair<ChunkRange, VerifyCopy>> pieces)
    : block_(block), reference_(reference), majority_(majority), to_check_(std::move(pieces)) {
  PSCHED_REQUIRE(!to_check_.empty(), block.first, block.count);
}

// The one place a search's phase changes; what each phase implies is checked on entering it.
void BlockSearch::move(Phase to) {
  const Phase from = phase_;
  const bool nothing_in = probe_ && !probe_->suspect_got && !probe_->other_got;
  bool legal = from != Phase::kEnded;
  switch (to) {
    case Phase::kChecking:  // a piece of the first copy, asked whole of another worker
      legal = legal && nothing_in && !(probe_->range == block_) && probe_->asked == probe_->range;
      break;
    case Phase::kHalving:  // a part of the range from its start, asked of both
      legal = legal && nothing_in && probe_->asked.count > 0 && probe_->asked.first == probe_->range.first &&
              probe_->asked.count <= probe_->range.count;
      break;
    case Phase::kEnded:
      break;
    case Phase::kNew:
      legal = false;
      break;
  }
  PSCHED_ASSERT(legal, int(from), int(to), block_.first, block_.count, probe_.has_value());
  phase_ = to;
}

BlockSearch::Next BlockSearch::start(const VerifyPeers& peers) {
  PSCHED_ASSERT(phase_ == Phase::kNew, int(phase_), block_.first);
  return next_probe(peers);
}

WorkerId BlockSearch::suspect() const {
  PSCHED_ASSERT(phase_ == Phase::kChecking || phase_ == Phase::kHalving, int(phase_), block_.first);
  return probe_->suspect.worker;
}

std::optional<VerifySearch> BlockSearch::stops_without(WorkerId gone, const VerifyPeers& peers) const {
  const WorkerId odd = suspect();
  if (odd == gone || !peers.connected(odd)) return VerifySearch::kOddWorkerLeft;
  if (!peers.someone_else({odd})) return VerifySearch::kNoOtherWorker;
  return std::nullopt;
}

// The search stops where it got (the mismatch names the smallest range known, and why); the
// verifier drops its queued steps, and running ones finish and change nothing.
BlockSearch::Next BlockSearch::end_search(VerifySearch why) {
  Next next;
  next.ended = why;
  move(Phase::kEnded);
  return next;
}

BlockSearch::Next BlockSearch::step_done(bool on_suspect, VerifyCopy got, const VerifyPeers& peers) {
  // kChecking asked the other worker only; kHalving asked each side once.
  const bool asked = phase_ == Phase::kChecking ? !on_suspect
                     : phase_ == Phase::kHalving ? !(on_suspect ? probe_->suspect_got : probe_->other_got)
                                                 : false;
  PSCHED_ASSERT(asked, int(phase_), on_suspect, block_.first, block_.count);
  Probe& probe = *probe_;
  (on_suspect ? probe.suspect_got : probe.other_got) = std::move(got);
  if (phase_ == Phase::kChecking) return probe_step(peers);  // the piece's own partial is known
  if (!probe.suspect_got || !probe.other_got) return Next{};  // the step's other copy is still running
  const bool differ = !same_bits(probe.suspect_got->partial, probe.other_got->partial);
  const ChunkRange rest{probe.asked.end(), probe.range.end() - probe.asked.end()};
  if (probe.asked == probe.range || differ) {  // the difference is in what was asked
    probe.range = probe.asked;
    probe.suspect.partial = probe.suspect_got->partial;
    return probe_step(peers);
  }
  // The left half agrees, so the right half differs.
  probe.range = rest;
  return ask(rest.count == 1 ? rest : ChunkRange{rest.first, rest.count / 2}, peers);
}

// On to the next of the odd copy's pieces; the search ends when none is left to search.
BlockSearch::Next BlockSearch::next_probe(const VerifyPeers& peers) {
  probe_.reset();
  VerifySearch why = VerifySearch::kNotReproduced;  // every piece searched agreed
  while (!to_check_.empty()) {
    auto [range, suspect] = std::move(to_check_.back());
    to_check_.pop_back();
    suspect.suspect = true;
    // A search needs the suspect's worker and another.
    if (!peers.connected(suspect.worker)) {
      why = VerifySearch::kOddWorkerLeft;
      continue;
    }
    if (!peers.someone_else({suspect.worker})) {
      why = VerifySearch::kNoOtherWorker;
      continue;
    }
    probe_ = Probe{range, range, std::move(suspect), std::nullopt, std::nullopt};
    if (range == block_) {  // the others' partial of it is known
      VerifyCopy other;
      other.partial = reference_;
      probe_->other_got = other;
      return probe_step(peers);
    }
    // A piece of a first copy: is it the one that differs?
    move(Phase::kChecking);
    Next next;
    next.steps.push_back(Step{range, false});
    return next;
  }
  return end_search(why);
}

// The probe's range and the other worker's partial of it are known: on to its left half, or done.
BlockSearch::Next BlockSearch::probe_step(const VerifyPeers& peers) {
  Probe& probe = *probe_;
  const VerifyCopy& other = *probe.other_got;
  if (same_bits(probe.suspect.partial, other.partial)) return next_probe(peers);  // not the odd piece
  if (probe.range.count == 1) {  // found: the chunk, the two workers and what each got
    Next next = end_search(VerifySearch::kFound);
    if (other.worker != 0) {
      VerifyCopy good = other;
      good.suspect = !majority_;
      next.found = Found{probe.range, probe.suspect, std::move(good)};
    }
    return next;
  }
  return ask(ChunkRange{probe.range.first, probe.range.count / 2}, peers);
}

BlockSearch::Next BlockSearch::ask(ChunkRange range, const VerifyPeers& peers) {
  Probe& probe = *probe_;
  // The odd copy's worker may have left between two steps.
  if (!peers.connected(probe.suspect.worker)) return end_search(VerifySearch::kOddWorkerLeft);
  if (!peers.someone_else({probe.suspect.worker})) return end_search(VerifySearch::kNoOtherWorker);
  probe.asked = range;
  probe.suspect_got.reset();
  probe.other_got.reset();
  move(Phase::kHalving);
  Next next;
  next.steps = {Step{range, true}, Step{range, false}};
  return next;
}

}  // namespace psched
