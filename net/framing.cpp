#include "net/framing.h"

#include <capnp/serialize.h>

namespace psched {

namespace {

// Cap'n Proto's serializer writing into a frame buffer.
class AppendTo final : public kj::OutputStream {
 public:
  explicit AppendTo(std::string& out) : out_(out) {}
  void write(const void* buffer, size_t size) override { out_.append(static_cast<const char*>(buffer), size); }

 private:
  std::string& out_;
};

// The first segment lent to one OutgoingMessage at a time on each thread; zero when lent.
thread_local capnp::word scratch[OutgoingMessage::kScratchWords];
thread_local bool scratch_lent = false;

}  // namespace

void append_frame(capnp::MessageBuilder& message, std::string& out) {
  const uint32_t n = uint32_t(capnp::computeSerializedSizeInWords(message) * sizeof(capnp::word));
  const char header[kFrameHeaderBytes] = {char(n & 0xff), char((n >> 8) & 0xff),
                                          char((n >> 16) & 0xff), char((n >> 24) & 0xff)};
  out.reserve(out.size() + kFrameHeaderBytes + n);
  out.append(header, kFrameHeaderBytes);
  AppendTo stream(out);
  capnp::writeMessage(stream, message);
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
