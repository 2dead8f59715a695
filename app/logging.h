// Logging setup shared by the daemons: spdlog to stderr, one line per event, level from a flag.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace psched {

// level: trace, debug, info, warning (or warn), error, critical, off. `name` prefixes each line.
Status setup_logging(const std::string& name, const std::string& level);

// Text a peer sent (names, reasons, error messages), made safe to log or show: bytes outside
// printable ASCII (newlines, terminal escapes, invalid UTF-8) become '?' so a peer cannot forge log
// lines or break a JSON encoder, and it is cut to max_bytes.
std::string printable(std::string_view text, size_t max_bytes = 256);

}  // namespace psched
