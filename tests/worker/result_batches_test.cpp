// ResultBatches fit the scheduler's frame limit whatever the number of outcomes, and lose none.
#include <catch2/catch.hpp>
#include <capnp/serialize.h>

#include <tuple>

#include "net/framing.h"
#include "net/wire_convert.h"
#include "proto/psched.capnp.h"
#include "worker/result_batches.h"

using namespace psched;

TEST_CASE("10,000 outcomes go out in batches that each fit the smallest frame limit, in order",
          "[result_batches]") {
  std::vector<ChunkOutcome> outcomes(10000);
  for (size_t i = 0; i < outcomes.size(); ++i) {
    outcomes[i].chunk = i;
    outcomes[i].partial = {double(i), 1, double(i), double(i)};
    outcomes[i].busy_seconds = 0.001;
    if (i % 1000 == 7) {
      outcomes[i].ok = false;
      outcomes[i].error = std::string(5000, 'e');  // cut to kMaxFailureMessageBytes
    }
  }
  std::vector<uint64_t> seen;
  size_t batches = 0;
  double busy = 0;
  build_result_batches(42, outcomes, kMinMaxFrameBytes, /*partial_block=*/1, [&](capnp::MessageBuilder& m) {
    ++batches;
    CHECK(capnp::computeSerializedSizeInWords(m) * sizeof(capnp::word) <= kMinMaxFrameBytes);
    auto batch = m.getRoot<wire::Message>().asReader().getResultBatch();
    CHECK(batch.getJobId() == 42);
    busy += batch.getBusySeconds();
    for (auto r : batch.getResults()) seen.push_back(r.getChunk());
    for (auto f : batch.getFailures()) {
      seen.push_back(f.getChunk());
      CHECK(f.getMessage().size() == kMaxFailureMessageBytes);
    }
  });
  CHECK(batches > 6);  // 10,000 x 40 bytes do not fit in one 64 KiB frame
  std::sort(seen.begin(), seen.end());
  REQUIRE(seen.size() == outcomes.size());
  for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == i);
  CHECK(busy == Approx(10.0));
}

TEST_CASE("a few outcomes under the default limit go out in one batch", "[result_batches]") {
  std::vector<ChunkOutcome> outcomes(3);
  size_t batches = 0;
  build_result_batches(1, outcomes, kDefaultMaxFrameBytes, /*partial_block=*/1, [&](capnp::MessageBuilder&) { ++batches; });
  CHECK(batches == 1);
}

TEST_CASE("merge_runs: consecutive chunks go out as one partial each run, with the same exact sum",
          "[result_batches]") {
  // Chunks 0..9 finished out of order, chunk 5 failed, chunk 12 alone: runs 0..4, 6..9 and 12.
  const std::vector<uint64_t> order = {3, 1, 0, 12, 4, 2, 9, 5, 7, 6, 8};
  std::vector<ChunkOutcome> outcomes;
  ExactSum want[3];
  for (const uint64_t c : order) {
    ChunkOutcome& o = outcomes.emplace_back();
    o.chunk = c;
    o.busy_seconds = 0.5;
    if (c == 5) {
      o.ok = false;
      o.error = "boom";
      continue;
    }
    ExactSum e;
    e.add(c % 2 ? 1e17 : 3.25);  // wide enough to round differently per chunk than merged
    e.add(-double(c));
    PartialSum p;
    p.exact = e;
    p.sum = e.rounded();
    p.count = c + 1;
    p.min = -double(c);
    p.max = double(c);
    o.partial = compact(p);
    want[c < 5 ? 0 : c < 12 ? 1 : 2].add(e);
  }
  std::vector<std::tuple<uint64_t, uint64_t, uint64_t, double, double>> runs;
  std::vector<uint64_t> failed;
  std::vector<ExactSum> sums;
  double busy = 0;
  build_result_batches(3, outcomes, kDefaultMaxFrameBytes, /*partial_block=*/0, [&](capnp::MessageBuilder& m) {
    auto batch = m.getRoot<wire::Message>().asReader().getResultBatch();
    busy += batch.getBusySeconds();
    for (auto r : batch.getResults()) {
      runs.emplace_back(r.getChunk(), r.getChunks(), r.getCount(), r.getMin(), r.getMax());
      sums.push_back(from_wire(r).exact);
      CHECK(r.getSum() == sums.back().rounded());
    }
    for (auto f : batch.getFailures()) failed.push_back(f.getChunk());
  });
  REQUIRE(runs.size() == 3);
  CHECK(runs[0] == std::make_tuple(uint64_t{0}, uint64_t{5}, uint64_t{15}, -4.0, 4.0));
  CHECK(runs[1] == std::make_tuple(uint64_t{6}, uint64_t{4}, uint64_t{7 + 8 + 9 + 10}, -9.0, 9.0));
  CHECK(runs[2] == std::make_tuple(uint64_t{12}, uint64_t{1}, uint64_t{13}, -12.0, 12.0));
  for (int i = 0; i < 3; ++i) CHECK(same_value(sums[size_t(i)], want[i]));
  CHECK(failed == std::vector<uint64_t>{5});
  CHECK(busy == Approx(5.5));
}
