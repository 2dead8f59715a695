#include "app/logging.h"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace psched {

Status setup_logging(const std::string& name, const std::string& level) {
  std::string l = level == "warning" ? "warn" : level;
  const auto parsed = spdlog::level::from_str(l);
  if (parsed == spdlog::level::off && l != "off")
    return Status::invalid(fmt::format(
        "unknown log level '{}' (expected trace, debug, info, warning, error, critical or off)",
        level));
  auto logger = spdlog::stderr_logger_mt(name);
  logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %n %^%l%$ %v");
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
  return Status::ok();
}

}  // namespace psched
