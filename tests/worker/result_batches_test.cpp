// ResultBatches fit the scheduler's frame limit whatever the number of outcomes, and lose none.
#include <catch2/catch.hpp>
#include <capnp/serialize.h>

#include "common/framing.h"
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
  build_result_batches(42, outcomes, kMinMaxFrameBytes, [&](capnp::MessageBuilder& m) {
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
  build_result_batches(1, outcomes, kDefaultMaxFrameBytes, [&](capnp::MessageBuilder&) { ++batches; });
  CHECK(batches == 1);
}
