// Logging setup shared by the daemons: spdlog to stderr, one line per event, level from a flag.
#pragma once

#include <string>

#include "core/status.h"  // printable(), for what peers send

namespace psched {

// level: trace, debug, info, warning (or warn), error, critical, off. `name` prefixes each line.
Status setup_logging(const std::string& name, const std::string& level);

}  // namespace psched
