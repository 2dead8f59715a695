#include "net/framing.h"

#include <capnp/serialize.h>

namespace psched {

void append_frame(capnp::MessageBuilder& message, std::string& out) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  const auto bytes = words.asBytes();
  const uint32_t n = uint32_t(bytes.size());
  const char header[kFrameHeaderBytes] = {char(n & 0xff), char((n >> 8) & 0xff),
                                          char((n >> 16) & 0xff), char((n >> 24) & 0xff)};
  out.append(header, kFrameHeaderBytes);
  out.append(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
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
