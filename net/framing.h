// Framing on every psched connection: a 4-byte little-endian length, then one flat Cap'n Proto
// message (standard segment table + segments). Frames over the limit are refused before a byte of
// the body is read; decoding applies Cap'n Proto's traversal and nesting limits so a hostile peer
// costs at most its frame size.
#pragma once

#include <capnp/message.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psched {

constexpr uint32_t kDefaultMaxFrameBytes = 16u << 20;
// The smallest frame limit a scheduler may set (--max-frame): every message that cannot be split
// must fit, the largest being a Hello (a 4 KiB token, names, device facts: under 8 KiB). Messages
// that grow with work (ResultBatch, TaskBatch) are split by their senders to fit the limit that
// Welcome announces.
constexpr uint32_t kMinMaxFrameBytes = 64u << 10;
constexpr uint32_t kFrameHeaderBytes = 4;

// Appends the frame for `message` to `out` (many frames may share one buffer and one write),
// written straight from the message's segments.
void append_frame(capnp::MessageBuilder& message, std::string& out);

// A message being built to send. Its first segment is this thread's reused scratch (Cap'n Proto
// zeroes what it used when the message is done) while no other message holds it and the size asked
// for fits, so a small message costs no allocation: a 2 KiB calloc per message was a sixth of
// psched's CPU for 10^4 small jobs. Otherwise the first segment is allocated as asked.
class OutgoingMessage {
 public:
  explicit OutgoingMessage(size_t first_segment_words = 256);
  ~OutgoingMessage();
  OutgoingMessage(const OutgoingMessage&) = delete;
  OutgoingMessage& operator=(const OutgoingMessage&) = delete;

  capnp::MessageBuilder& builder() { return *builder_; }
  operator capnp::MessageBuilder&() { return *builder_; }  // NOLINT: used where a builder is
  template <typename Root>
  typename Root::Builder initRoot() {
    return builder_->initRoot<Root>();
  }

  static constexpr size_t kScratchWords = 8192;  // 64 KiB, of which only what is used is zeroed

 private:
  bool holds_scratch_ = false;
  std::optional<capnp::MallocMessageBuilder> builder_;
};

uint32_t decode_frame_length(const uint8_t header[kFrameHeaderBytes]);

// Reader options for a frame of `frame_bytes`: traversal limited to four times the frame's words,
// plus 64, nesting to 16. Cap'n Proto counts words each time a struct or list is read, so a handler
// may read parts of a message more than once (a few times, never in a loop over the message), while
// a message built to amplify itself (many pointers to one large list) costs at most 4x its frame.
capnp::ReaderOptions reader_options_for(size_t frame_bytes);

}  // namespace psched
