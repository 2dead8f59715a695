// /metrics: psched's state in the Prometheus text exposition format (version 0.0.4), every name
// prefixed psched_ with its unit in the name. It reads the Scheduler; nothing in the Scheduler
// depends on it.
#pragma once

#include <string>

namespace psched {

class Scheduler;

// The whole /metrics body.
std::string metrics_text(const Scheduler& scheduler);

}  // namespace psched
