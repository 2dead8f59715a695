// What the scheduler knows of each connected peer: workers (their device, task window and the
// chunks they hold) and clients (their jobs). Pure bookkeeping, owned by the Scheduler's loop.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "common/connection.h"
#include "scheduler/job.h"

namespace psched {

struct WorkerRecord {
  WorkerId id = 0;
  std::string name, host, backend, device_name;
  uint32_t pid = 0;
  uint64_t memory_total_bytes = 0, memory_limit_bytes = 0, memory_used_bytes = 0;
  uint32_t compute_major = 0, compute_minor = 0, threads = 0;
  uint32_t slots = 1;  // chunks in flight the worker asked for

  std::shared_ptr<FramedConnection> conn;
  std::set<std::pair<JobId, uint64_t>> in_flight;  // (job, chunk)
  std::set<JobId> defined_jobs;                    // jobs whose spec it has been sent
  uint64_t chunks_done = 0;
  uint64_t bytes_reduced = 0;
  double busy_seconds = 0;
  std::chrono::steady_clock::time_point joined = std::chrono::steady_clock::now();

  uint32_t free_slots() const {
    return in_flight.size() >= slots ? 0 : uint32_t(slots - in_flight.size());
  }
};

struct ClientRecord {
  ClientId id = 0;
  std::string name;
  std::shared_ptr<FramedConnection> conn;
  std::set<JobId> jobs;
};

}  // namespace psched
