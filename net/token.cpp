#include "net/token.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace psched {

StatusOr<std::string> load_token(const std::string& path) {
  std::string token;
  if (path.empty()) {
    const char* env = std::getenv("PSCHED_TOKEN");
    token = env ? env : "";
  } else {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0)
      return Status::invalid(fmt::format("cannot read token file '{}': {}", path, std::strerror(errno)));
    if (S_ISDIR(st.st_mode))
      return Status::invalid(fmt::format("token file '{}' is a directory; expected a file holding the "
                                         "cluster token (--token-file)", path));
    if (st.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH))
      spdlog::warn("token file '{}' is readable by other users; chmod 600 it", path);
    std::ifstream in(path);
    if (!in) return Status::invalid(fmt::format("cannot read token file '{}'", path));
    std::stringstream text;
    text << in.rdbuf();
    token = text.str();
    if (token.find_first_not_of(" \t\r\n") == std::string::npos)
      return Status::invalid(fmt::format("token file '{}' is empty", path));
  }
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ' ||
                            token.back() == '\t'))
    token.pop_back();
  if (token.size() > 4096) return Status::invalid("token is longer than 4096 bytes");
  return token;
}

bool same_token(std::string_view presented, std::string_view expected) {
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i)
    diff |= unsigned(expected[i]) ^ unsigned(i < presented.size() ? presented[i] : 0);
  return diff == 0;
}

}  // namespace psched
