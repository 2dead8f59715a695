// pbench --verify: what the scheduler's comparison of chunk copies found, as text (as JSON: the
// job result's "verify", client/result_json.h). A mismatch names the chunk, every copy's worker
// and device and their sums, and the suspects; any mismatch makes pbench exit 1.
#pragma once

#include <string>

#include "pclient/client.h"

namespace pbench {

// The text lines (stdout) for a run with verify on.
void print_verify(const pclient::Result& result);
// Empty when no copies disagreed; otherwise one line for the exit message.
std::string verify_problem(const pclient::Result& result);

}  // namespace pbench
