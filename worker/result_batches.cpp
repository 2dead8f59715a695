#include "worker/result_batches.h"

#include <algorithm>
#include <span>

#include "net/framing.h"
#include "net/wire_convert.h"
#include "proto/psched.capnp.h"

namespace psched {

namespace {

// Bytes an outcome adds to a flat message: a ChunkPartial is 6 data words and pointers to its
// ExactSum (2 data words, a pointer), whose terms take a word each, and to its squares' (null
// unless the job asks for var/std; the same size then); a ChunkFailure one data word
// and a pointer, plus its text (NUL-terminated, padded to a word).
size_t partial_bytes(const CompactPartial& p) {
  return 88 + 8 * p.exact.size() + (p.has_squares ? 24 + 8 * p.squares.size() : 0);
}
size_t failure_bytes(const ChunkOutcome& o) {
  const size_t text = std::min(o.error.size(), kMaxFailureMessageBytes) + 1;
  return 16 + (text + 7) / 8 * 8;
}

// Segment table, root pointer, Message and ResultBatch structs and two list tags come to under
// 128 bytes; the rest of the reserve covers segment boundaries of a multi-segment builder.
constexpr size_t kBatchOverheadBytes = 1024;

// What goes on the wire: the partial of a run of consecutive chunks, or one chunk's failure.
struct Item {
  uint64_t first = 0, chunks = 1;
  CompactPartial partial;          // ok items
  const ChunkOutcome* failure = nullptr;
  double busy = 0;
  size_t bytes() const { return failure ? failure_bytes(*failure) : partial_bytes(partial); }
};

// Adds terms into an exact sum, normalising before its digits could overflow.
struct TermsMerger {
  ExactSum exact;
  uint64_t adds = 0;
  void add(const ExactTerms& t) {
    if (adds + t.size() > kExactAddsBeforeNormalize / 2) {
      exact.normalize();
      adds = 0;
    }
    exact.add_terms(t.data(), t.size());
    adds += t.size();
    exact.nan += t.nan;
    exact.pos_inf += t.pos_inf;
    exact.neg_inf += t.neg_inf;
  }
};

// The run's partial: its chunks' exact sums (and squares) merged (ExactSum is exact, so the
// scheduler's total is the same bits whether it merges per chunk or per run), counts added, min
// and max taken as the scheduler takes them.
CompactPartial merge_run(std::span<const ChunkOutcome* const> run) {
  TermsMerger exact, squares;
  CompactPartial out;
  for (const ChunkOutcome* o : run) {
    const CompactPartial& p = o->partial;
    exact.add(p.exact);
    if (p.has_squares) {
      out.has_squares = true;
      squares.add(p.squares);
    }
    out.count += p.count;
    out.min = p.min < out.min ? p.min : out.min;
    out.max = p.max > out.max ? p.max : out.max;
  }
  out.exact = ExactTerms(exact.exact);
  out.sum = out.exact.rounded();
  if (out.has_squares) out.squares = ExactTerms(squares.exact);
  return out;
}

// The ok outcomes as runs of consecutive chunks, cut at multiples of `block` (0: never; 1: one
// item per chunk), then the failures.
std::vector<Item> items_of(const std::vector<ChunkOutcome>& outcomes, uint64_t block) {
  const bool merge_runs = block != 1;
  std::vector<Item> items;
  std::vector<const ChunkOutcome*> ok;
  for (const ChunkOutcome& o : outcomes) {
    if (o.ok) {
      ok.push_back(&o);
      continue;
    }
    Item f;
    f.first = o.chunk;
    f.failure = &o;
    f.busy = o.busy_seconds;
    items.push_back(f);
  }
  // In chunk order already, as a batched launch's outcomes come: then not sorted again.
  const auto by_chunk = [](const ChunkOutcome* a, const ChunkOutcome* b) { return a->chunk < b->chunk; };
  if (merge_runs && !std::is_sorted(ok.begin(), ok.end(), by_chunk)) std::sort(ok.begin(), ok.end(), by_chunk);
  for (size_t i = 0; i < ok.size();) {
    size_t end = i + 1;
    while (merge_runs && end < ok.size() && ok[end]->chunk == ok[end - 1]->chunk + ok[end - 1]->chunks &&
           (block == 0 || ok[end]->chunk % block != 0))
      ++end;
    Item item;
    item.first = ok[i]->chunk;
    item.chunks = 0;
    for (size_t k = i; k < end; ++k) {
      item.busy += ok[k]->busy_seconds;
      item.chunks += ok[k]->chunks;
    }
    if (end - i == 1) {
      item.partial = ok[i]->partial;
    } else {
      item.partial = merge_run(std::span(ok).subspan(i, end - i));
    }
    items.push_back(std::move(item));
    i = end;
  }
  return items;
}

}  // namespace

void build_result_batches(uint64_t job_id, const std::vector<ChunkOutcome>& outcomes,
                          uint32_t max_frame_bytes, uint64_t partial_block,
                          const std::function<void(capnp::MessageBuilder&)>& send,
                          double joules_per_busy_second) {
  const size_t budget = max_frame_bytes > 2 * kBatchOverheadBytes ? max_frame_bytes - kBatchOverheadBytes
                                                                  : kBatchOverheadBytes;
  const std::vector<Item> items = items_of(outcomes, partial_block);
  size_t begin = 0;
  while (begin < items.size()) {
    size_t end = begin, bytes = 0, ok = 0;
    double busy = 0;
    // At least one item per batch: even the largest failure fits kMinMaxFrameBytes.
    while (end < items.size() && (end == begin || bytes + items[end].bytes() <= budget)) {
      bytes += items[end].bytes();
      ok += items[end].failure ? 0 : 1;
      busy += items[end].busy;
      ++end;
    }
    OutgoingMessage m(uint32_t(std::min<size_t>(bytes / 8 + 64, 1u << 20)));
    auto batch = m.initRoot<wire::Message>().initResultBatch();
    batch.setJobId(job_id);
    batch.setBusySeconds(busy);
    batch.setEnergyJoules(busy * joules_per_busy_second);
    auto results = batch.initResults(uint32_t(ok));
    auto failures = batch.initFailures(uint32_t(end - begin - ok));
    uint32_t r = 0, f = 0;
    for (size_t i = begin; i < end; ++i) {
      const Item& item = items[i];
      if (!item.failure) {
        to_wire(item.first, item.partial, results[r]);
        results[r++].setChunks(item.chunks);
      } else {
        failures[f].setChunk(item.first);
        failures[f++].setMessage(item.failure->error.substr(0, kMaxFailureMessageBytes));
      }
    }
    send(m);
    begin = end;
  }
}

uint64_t build_returned_batch(uint64_t job_id, const std::vector<ChunkRange>& returned,
                              const std::function<void(capnp::MessageBuilder&)>& send) {
  OutgoingMessage m(64 + returned.size() * 4);
  auto batch = m.initRoot<wire::Message>().initResultBatch();
  batch.setJobId(job_id);
  auto list = batch.initReturned(uint32_t(returned.size()));
  uint64_t chunks = 0;
  for (size_t i = 0; i < returned.size(); ++i) {
    list[uint32_t(i)].setFirst(returned[i].first);
    list[uint32_t(i)].setCount(uint32_t(returned[i].count));
    chunks += returned[i].count;
  }
  send(m);
  return chunks;
}

}  // namespace psched
