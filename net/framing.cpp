#include "net/framing.h"

namespace psched {

namespace {

void append_le32(std::string& out, uint32_t v) {
  const char bytes[4] = {char(v & 0xff), char((v >> 8) & 0xff), char((v >> 16) & 0xff), char((v >> 24) & 0xff)};
  out.append(bytes, 4);
}

// The first segment lent to one OutgoingMessage at a time on each thread; zero when lent.
thread_local capnp::word scratch[OutgoingMessage::kScratchWords];
thread_local bool scratch_lent = false;

}  // namespace

// Cap'n Proto's stream format written straight into the frame (what capnp::writeMessage writes,
// without its output stream and a second look at the segments): the segment count minus one, each
// segment's size in words, padding to a word, then the segments.
void append_frame(capnp::MessageBuilder& message, std::string& out) {
  const kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments = message.getSegmentsForOutput();
  const size_t table_words = segments.size() / 2 + 1;
  size_t words = table_words;
  for (const auto& s : segments) words += s.size();
  const uint32_t n = uint32_t(words * sizeof(capnp::word));
  out.reserve(out.size() + kFrameHeaderBytes + n);
  append_le32(out, n);
  append_le32(out, uint32_t(segments.size() - 1));
  for (const auto& s : segments) append_le32(out, uint32_t(s.size()));
  if (segments.size() % 2 == 0) append_le32(out, 0);
  for (const auto& s : segments) out.append(reinterpret_cast<const char*>(s.begin()), s.size() * sizeof(capnp::word));
}

OutgoingMessage::OutgoingMessage(size_t first_segment_words) {
  if (!scratch_lent && first_segment_words <= kScratchWords) {
    scratch_lent = holds_scratch_ = true;
    builder_.emplace(kj::arrayPtr(scratch, kScratchWords));
  } else {
    builder_.emplace(uint(first_segment_words));
  }
}

OutgoingMessage::~OutgoingMessage() {
  builder_.reset();  // zeroes what it used of the scratch
  if (holds_scratch_) scratch_lent = false;
}

uint32_t decode_frame_length(const uint8_t h[kFrameHeaderBytes]) {
  return uint32_t(h[0]) | uint32_t(h[1]) << 8 | uint32_t(h[2]) << 16 | uint32_t(h[3]) << 24;
}

capnp::ReaderOptions reader_options_for(size_t frame_bytes) {
  capnp::ReaderOptions options;
  options.traversalLimitInWords = frame_bytes / sizeof(capnp::word) * 4 + 64;
  options.nestingLimit = 16;
  return options;
}

}  // namespace psched
