#include "worker/result_batches.h"

#include <algorithm>

#include "common/wire_convert.h"
#include "proto/psched.capnp.h"

namespace psched {

namespace {

// Bytes an outcome adds to a flat message: a ChunkPartial is 5 data words and a pointer to its
// ExactSum (2 data words, a pointer), whose terms take a word each; a ChunkFailure one data word
// and a pointer, plus its text (NUL-terminated, padded to a word).
size_t wire_bytes(const ChunkOutcome& o) {
  if (o.ok) return 72 + 8 * o.partial.exact.size();
  const size_t text = std::min(o.error.size(), kMaxFailureMessageBytes) + 1;
  return 16 + (text + 7) / 8 * 8;
}

// Segment table, root pointer, Message and ResultBatch structs and two list tags come to under
// 128 bytes; the rest of the reserve covers segment boundaries of a multi-segment builder.
constexpr size_t kBatchOverheadBytes = 1024;

}  // namespace

void build_result_batches(uint64_t job_id, const std::vector<ChunkOutcome>& outcomes,
                          uint32_t max_frame_bytes,
                          const std::function<void(capnp::MessageBuilder&)>& send) {
  const size_t budget = max_frame_bytes > 2 * kBatchOverheadBytes ? max_frame_bytes - kBatchOverheadBytes
                                                                  : kBatchOverheadBytes;
  size_t begin = 0;
  while (begin < outcomes.size()) {
    size_t end = begin, bytes = 0, ok = 0;
    double busy = 0;
    // At least one outcome per batch: even the largest failure fits kMinMaxFrameBytes.
    while (end < outcomes.size() &&
           (end == begin || bytes + wire_bytes(outcomes[end]) <= budget)) {
      bytes += wire_bytes(outcomes[end]);
      ok += outcomes[end].ok ? 1 : 0;
      busy += outcomes[end].busy_seconds;
      ++end;
    }
    capnp::MallocMessageBuilder m(uint32_t(std::min<size_t>(bytes / 8 + 64, 1u << 20)));
    auto batch = m.initRoot<wire::Message>().initResultBatch();
    batch.setJobId(job_id);
    batch.setBusySeconds(busy);
    auto results = batch.initResults(uint32_t(ok));
    auto failures = batch.initFailures(uint32_t(end - begin - ok));
    uint32_t r = 0, f = 0;
    for (size_t i = begin; i < end; ++i) {
      const ChunkOutcome& o = outcomes[i];
      if (o.ok) {
        to_wire(o.chunk, o.partial, results[r++]);
      } else {
        failures[f].setChunk(o.chunk);
        failures[f++].setMessage(o.error.substr(0, kMaxFailureMessageBytes));
      }
    }
    send(m);
    begin = end;
  }
}

}  // namespace psched
