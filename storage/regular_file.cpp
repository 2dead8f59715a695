#include "storage/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace psched {

int open_regular(const std::string& path, struct stat& st, Status& status, int& error) {
  // O_NONBLOCK: open() of a FIFO with no writer returns at once; it changes nothing for a regular
  // file (Linux reads regular files whole whatever the flag says).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    error = errno;
    if (fd >= 0) ::close(fd);
    status = Status::error(fmt::format("{}: {}", path, std::strerror(error)));
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    error = 0;
    status = Status::error(fmt::format("{}: not a regular file", path));
    return -1;
  }
  return fd;
}

}  // namespace psched
