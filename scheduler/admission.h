// Admission: what the scheduler lets each peer take, so that no one client locks out the rest.
// Jobs: what a job costs the scheduler does not grow with its chunks (its RangeTable holds what is
// in flight, not a state per chunk: scheduler/range_table.h), so the budget counts jobs, a few KB
// each; each client may hold at most its share, so while one client is at its limit the budget
// still has room for others. Connections:
// those that have not said Hello yet live under their own, smaller limit; past it the oldest is
// closed to make room, so a flood of silent connections cannot keep a real peer out (together with
// the short handshake deadline). Refusals are logged at most once a second per kind.
#pragma once

#include <chrono>
#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "core/status.h"

namespace psched {

class FramedConnection;

struct AdmissionLimits {
  uint64_t max_jobs = uint64_t{1} << 16;         // running jobs of every client (~2 KB each, at rest)
  uint64_t max_client_jobs = uint64_t{1} << 14;  // one client's running jobs: a quarter of them
  uint32_t max_pending_connections = 256;        // connections before Hello
};

// Ok, or the JobFailed message saying which limit (and option) one more job would pass, given the
// running jobs of its client and of the scheduler.
Status admit_job(uint64_t client_jobs, uint64_t all_jobs, const AdmissionLimits& limits);

// At most one line per interval; lines held back are counted and the count goes with the next.
class RateLimitedLog {
 public:
  explicit RateLimitedLog(std::chrono::milliseconds interval = std::chrono::seconds(1))
      : interval_(interval) {}
  void warn(const std::string& line);

 private:
  std::chrono::milliseconds interval_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t held_back_ = 0;
};

// Connections that have not said Hello, oldest first.
class PendingConnections {
 public:
  using Entry = std::list<std::weak_ptr<FramedConnection>>::iterator;

  Entry add(std::weak_ptr<FramedConnection> conn) {
    entries_.push_back(std::move(conn));
    return std::prev(entries_.end());
  }
  // Called from the connection's close handler: every entry is removed when its connection closes.
  void remove(Entry e) { entries_.erase(e); }
  size_t size() const { return entries_.size(); }
  // The oldest (null when none); closing it removes it through its close handler.
  std::shared_ptr<FramedConnection> oldest() const {
    return entries_.empty() ? nullptr : entries_.front().lock();
  }

 private:
  std::list<std::weak_ptr<FramedConnection>> entries_;
};

}  // namespace psched
