#include "common/scheduler_file.h"

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

Result<SchedulerFileInfo> read_scheduler_file(const std::string& path) {
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
    return Status::error(fmt::format("scheduler file '{}' is not valid: not JSON ({} bytes)", path,
                                     text.str().size()));
  if (!j.is_object() || !j.contains("address") || !j["address"].is_string())
    return Status::error(
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

Result<SchedulerFileInfo> wait_for_scheduler_file(const std::string& path, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    Result<SchedulerFileInfo> info = read_scheduler_file(path);
    if (info) return info;
    if (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)
      return Status::error(fmt::format("no usable scheduler file within {} ms: {}", timeout_ms,
                                       info.message()));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace psched
