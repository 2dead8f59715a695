// Counts in messages: "1 worker", "2 workers", never "1 workers".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace psched {

// `n` and the noun, plural unless n == 1 (noun + "s", or `plural` when the word is irregular).
inline std::string counted(uint64_t n, std::string_view noun, std::string_view plural = {}) {
  std::string out = std::to_string(n);
  out += ' ';
  if (n == 1) {
    out += noun;
  } else if (!plural.empty()) {
    out += plural;
  } else {
    out += noun;
    out += 's';
  }
  return out;
}

}  // namespace psched
