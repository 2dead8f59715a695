#include <catch2/catch.hpp>
#include <cstring>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "net/address.h"
#include "net/framing.h"
#include "net/wire_convert.h"

using namespace psched;

TEST_CASE("a frame is a little-endian length followed by the flat message", "[framing]") {
  capnp::MallocMessageBuilder m;
  auto submit = m.initRoot<wire::Message>().initSubmit();
  submit.setTag(7);
  JobSpec spec;
  spec.generator = Generator::kArange;
  spec.rows = 123;
  to_wire(spec, submit.initSpec());
  std::string out;
  append_frame(m, out);
  append_frame(m, out);  // frames share a buffer
  const uint32_t n = decode_frame_length(reinterpret_cast<const uint8_t*>(out.data()));
  REQUIRE(out.size() == 2 * (4 + n));
  std::vector<capnp::word> words(n / 8);
  std::memcpy(words.data(), out.data() + 4, n);
  capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(words.data(), words.size()),
                                       reader_options_for(n));
  auto root = reader.getRoot<wire::Message>();
  REQUIRE(root.which() == wire::Message::SUBMIT);
  CHECK(root.getSubmit().getTag() == 7);
  const JobSpec back = from_wire(root.getSubmit().getSpec());
  CHECK(back.rows == 123);
  CHECK(back.generator == Generator::kArange);
  CHECK(back.row_sel.step == spec.row_sel.step);
}

TEST_CASE("a frame's body is what Cap'n Proto's own serializer writes, for any number of segments", "[framing]") {
  for (const uint32_t first_words : {1024u, 8u, 1u}) {  // one segment; several; one per allocation
    capnp::MallocMessageBuilder m(first_words, capnp::AllocationStrategy::FIXED_SIZE);
    auto progress = m.initRoot<wire::Message>().initProgress();
    progress.setJobId(9);
    auto list = progress.initPartials(first_words == 1 ? 3 : 40);
    for (uint32_t i = 0; i < list.size(); ++i) list[i].setChunk(i);
    const auto segments = m.getSegmentsForOutput().size();
    CHECK((first_words == 1024 ? segments == 1 : segments > 1));
    std::string out;
    append_frame(m, out);
    const kj::Array<capnp::word> flat = capnp::messageToFlatArray(m);
    const kj::ArrayPtr<const kj::byte> bytes = flat.asBytes();
    REQUIRE(decode_frame_length(reinterpret_cast<const uint8_t*>(out.data())) == bytes.size());
    CHECK(out.substr(4) == std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size()));
  }
}

TEST_CASE("addresses parse in the three forms users write", "[address]") {
  auto a = parse_address("tcp://head:9000");
  REQUIRE(a);
  CHECK(a->host == "head");
  CHECK(a->port == 9000);
  auto b = parse_address("head:8786");
  REQUIRE(b);
  CHECK(b->port == 8786);
  auto c = parse_address("head");
  REQUIRE(c);
  CHECK(c->port == 8786);
  auto d = parse_address("[::1]:99");
  REQUIRE(d);
  CHECK(d->host == "::1");
  CHECK(d->port == 99);
}

TEST_CASE("bad addresses are refused with a message naming them", "[address]") {
  for (const char* bad : {"", "tcp://", "tcp://[not-an-address", "udp://x:1", "host:99999", "host:", "a b:1",
                          "host:12x"}) {
    auto r = parse_address(bad);
    CHECK_FALSE(r);
    CHECK(r.message().find("invalid address") != std::string::npos);
  }
}
