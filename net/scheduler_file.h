// The scheduler file (Dask's --scheduler-file habit on a shared filesystem): psched writes its
// address there atomically; workers and clients wait for it to appear and connect.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace psched {

struct SchedulerFileInfo {
  std::string address;    // tcp://host:port
  std::string dashboard;  // http://host:port or empty when disabled
  uint32_t protocol_version = 0;
  int64_t pid = 0;
};

// What makes `path` unusable as a scheduler file whatever happens next, said naming the option: a
// directory; for psched, which writes it (to_write), also a directory to write in that does not
// exist or is not writable. Programs check it at start instead of waiting for ever.
Status check_scheduler_file_path(const std::string& path, bool to_write);
// Writes PATH.tmp.<pid> then renames it over PATH: readers never see half a file.
Status write_scheduler_file(const std::string& path, const SchedulerFileInfo& info);
// The error says precisely why not: no file yet, its directory missing, unreadable, not JSON, no
// address.
StatusOr<SchedulerFileInfo> read_scheduler_file(const std::string& path);
// Polls (every 50 ms, an inotify-free wait that also works on NFS) until the file parses or
// timeout_ms passes; timeout_ms < 0 waits forever. The error ends with the last read's reason.
StatusOr<SchedulerFileInfo> wait_for_scheduler_file(const std::string& path, int64_t timeout_ms);

}  // namespace psched
