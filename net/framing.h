// Framing on every psched connection: a 4-byte little-endian length, then one flat Cap'n Proto
// message (standard segment table + segments). Frames over the limit are refused before a byte of
// the body is read; decoding applies Cap'n Proto's traversal and nesting limits so a hostile peer
// costs at most its frame size.
#pragma once

#include <capnp/message.h>

#include <cstdint>
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

// Appends the frame for `message` to `out` (many frames may share one buffer and one write).
void append_frame(capnp::MessageBuilder& message, std::string& out);

uint32_t decode_frame_length(const uint8_t header[kFrameHeaderBytes]);

// Reader options for a frame of `frame_bytes`: traversal limited to four times the frame's words,
// plus 64, nesting to 16. Cap'n Proto counts words each time a struct or list is read, so a handler
// may read parts of a message more than once (a few times, never in a loop over the message), while
// a message built to amplify itself (many pointers to one large list) costs at most 4x its frame.
capnp::ReaderOptions reader_options_for(size_t frame_bytes);

}  // namespace psched
