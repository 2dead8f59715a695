// The scheduler's names for its peers and jobs: numbers it assigns (WorkerId and ClientId in
// Welcome, JobId in JobAccepted), never reused while the scheduler runs.
#pragma once

#include <cstdint>

namespace psched {

using WorkerId = uint32_t;
using ClientId = uint32_t;
using JobId = uint64_t;

}  // namespace psched
