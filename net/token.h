// The shared token (docs/design.md, "Discovery and security"): read from --token-file or PSCHED_TOKEN.
// A token file that others can read is accepted with a warning; the token itself is never logged.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace psched {

// Empty path: PSCHED_TOKEN or "" (no token). Trailing whitespace and newlines are stripped.
StatusOr<std::string> load_token(const std::string& path);

// Whether `presented` is `expected`, in time that depends on the expected token's length only.
bool same_token(std::string_view presented, std::string_view expected);

}  // namespace psched
