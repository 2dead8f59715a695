#include "core/check.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace psched::detail {

void check_failed(const char* kind, const char* file, int line, const char* condition,
                  const std::string& values) {
  spdlog::critical("{}:{}: {}: {}{}", file, line, kind, condition, values);
  spdlog::default_logger()->flush();
  std::abort();
}

}  // namespace psched::detail
