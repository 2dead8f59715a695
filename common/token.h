// The shared token (docs/design.md, "Discovery and security"): read from --token-file or PSCHED_TOKEN.
// A token file that others can read is accepted with a warning; the token itself is never logged.
#pragma once

#include <string>

#include "common/status.h"

namespace psched {

// Empty path: PSCHED_TOKEN or "" (no token). Trailing whitespace and newlines are stripped.
Result<std::string> load_token(const std::string& path);

}  // namespace psched
