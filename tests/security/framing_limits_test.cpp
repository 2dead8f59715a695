// What reader_options_for() promises, checked on hand-made messages without a daemon: a pointer
// chain deeper than the nesting limit and a list that claims half a billion elements in one word
// both fail to read (with Cap'n Proto's exception) instead of costing time or memory.
#include <catch2/catch.hpp>
#include <capnp/any.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

#include "net/framing.h"
#include "proto/psched.capnp.h"
#include "raw_peer.h"

using namespace psched::test;

namespace {

// Reads the frame's message the way every psched connection does, then walks all of it.
uint64_t walk(const std::string& frame) {
  const std::string body = frame.substr(psched::kFrameHeaderBytes);
  kj::Array<capnp::word> words = kj::heapArray<capnp::word>(body.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), body.data(), body.size());
  capnp::FlatArrayMessageReader reader(words, psched::reader_options_for(body.size()));
  return reader.getRoot<capnp::AnyPointer>().targetSize().wordCount;
}

std::vector<uint64_t> chain(int depth) {
  std::vector<uint64_t> words;
  for (int i = 0; i < depth; ++i) words.push_back(struct_ptr(0, 0, 1));  // pointer to the next
  words.push_back(0);
  return words;
}

}  // namespace

TEST_CASE("reader_options_for: a pointer chain past the nesting limit of 16 is refused", "[security]") {
  CHECK(walk(single_segment(chain(10))) == 10);
  CHECK_THROWS_AS(walk(single_segment(chain(100))), kj::Exception);
}

TEST_CASE("reader_options_for: a list of 2^29-1 zero-sized structs in one word exceeds the traversal limit",
          "[security]") {
  // Message(resultBatch) -> ResultBatch{jobId 1, results -> [tag: N elements of 0 words]}.
  auto results_of = [](uint32_t n) {
    const std::string frame = single_segment({struct_ptr(0, 1, 1), uint64_t(psched::wire::Message::RESULT_BATCH),
                                              struct_ptr(0, 2, 2), 1, 0, composite_list_ptr(1, 0), 0,
                                              uint64_t(n) << 2});
    const std::string body = frame.substr(psched::kFrameHeaderBytes);
    kj::Array<capnp::word> words = kj::heapArray<capnp::word>(body.size() / sizeof(capnp::word));
    std::memcpy(words.begin(), body.data(), body.size());
    capnp::FlatArrayMessageReader reader(words, psched::reader_options_for(body.size()));
    return reader.getRoot<psched::wire::Message>().getResultBatch().getResults().size();
  };
  CHECK(results_of(10) == 10);
  CHECK_THROWS_WITH(results_of((1u << 29) - 1), Catch::Contains("traversal limit"));
}
