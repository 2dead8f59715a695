#include "net/scheduler_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace psched {

Status check_scheduler_file_path(const std::string& path, bool to_write) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec))
    return Status::invalid(fmt::format("--scheduler-file '{}' is a directory; expected the path of the "
                                       "file psched writes its address to (e.g. '{}')",
                                       path, (fs::path(path) / "scheduler.json").string()));
  if (!to_write) return Status::ok();
  fs::path dir = fs::path(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec))
    return Status::invalid(fmt::format("--scheduler-file '{}': its directory '{}' does not exist", path,
                                       dir.string()));
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::invalid(fmt::format("--scheduler-file '{}': cannot write in its directory '{}': {}",
                                       path, dir.string(), std::strerror(errno)));
  return Status::ok();
}

Status write_scheduler_file(const std::string& path, const SchedulerFileInfo& info) {
  nlohmann::json j = {{"address", info.address},
                      {"dashboard", info.dashboard},
                      {"protocol_version", info.protocol_version},
                      {"pid", info.pid}};
  const std::string tmp = fmt::format("{}.tmp.{}", path, getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Status::error(fmt::format("cannot write scheduler file '{}'", tmp));
    out << j.dump(2) << "\n";
    if (!out.flush()) return Status::error(fmt::format("cannot write scheduler file '{}'", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::error(fmt::format("cannot rename scheduler file into '{}'", path));
  }
  return Status::ok();
}

StatusOr<SchedulerFileInfo> read_scheduler_file(const std::string& path) {
  if (Status st = check_scheduler_file_path(path, /*to_write=*/false); !st) return st;
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    std::string why = std::strerror(err);
    if (err == ENOENT) {
      // Say which part is missing: a directory that does not exist is likely a wrong path.
      const std::filesystem::path dir = std::filesystem::path(path).parent_path();
      std::error_code ec;
      if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
        why = fmt::format("no such file; its directory {} does not exist", dir.string());
      else
        why = "no such file yet";
    }
    return Status::error(fmt::format("cannot read scheduler file '{}': {}", path, why));
  }
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return Status::invalid(fmt::format("scheduler file '{}' is not valid: not JSON ({} bytes)", path,
                                       text.str().size()));
  if (!j.is_object() || !j.contains("address") || !j["address"].is_string())
    return Status::invalid(
        fmt::format("scheduler file '{}' is not valid: no \"address\" string in it", path));
  SchedulerFileInfo info;
  info.address = j["address"].get<std::string>();
  if (j.contains("dashboard") && j["dashboard"].is_string())
    info.dashboard = j["dashboard"].get<std::string>();
  if (j.contains("protocol_version") && j["protocol_version"].is_number_unsigned())
    info.protocol_version = j["protocol_version"].get<uint32_t>();
  if (j.contains("pid") && j["pid"].is_number_integer()) info.pid = j["pid"].get<int64_t>();
  return info;
}

StatusOr<SchedulerFileInfo> wait_for_scheduler_file(const std::string& path, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    StatusOr<SchedulerFileInfo> info = read_scheduler_file(path);
    if (info) return info;
    if (Status st = check_scheduler_file_path(path, false); !st) return st;  // never a file
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)
      return Status::error(fmt::format("no usable scheduler file within {} ms: {}", timeout_ms,
                                       info.message()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace psched
