// Every file a stored array is read from is a regular file. A path that names a FIFO, a socket or
// a device (on one node only, or a Zarr chunk the client never opened) would block open() or
// read() forever: a hung pbench, or a worker's reader holding its chunk until psched calls the
// worker stalled. So files are opened without blocking and refused unless regular.
#pragma once

#include <sys/stat.h>

#include <string>

#include "core/status.h"

namespace psched {

// A descriptor for reading `path` (the caller closes it), or -1 with `status` naming the path and
// why, and `error` the errno (0 for "not a regular file"); `st` is the file's stat.
int open_regular(const std::string& path, struct stat& st, Status& status, int& error);

}  // namespace psched
