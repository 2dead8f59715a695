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

// Chunks `first` .. `first + count - 1` in words: "chunk 7", "chunks 5 to 9". A range from a peer may
// end past 2^64; it is said as "N chunks from chunk F", never backwards ("chunks 5 to 1").
inline std::string chunks_text(uint64_t first, uint64_t count) {
  if (count == 1) return "chunk " + std::to_string(first);
  if (count == 0) return "no chunks (at chunk " + std::to_string(first) + ")";
  if (count - 1 > UINT64_MAX - first) return std::to_string(count) + " chunks from chunk " + std::to_string(first);
  return "chunks " + std::to_string(first) + " to " + std::to_string(first + (count - 1));
}

}  // namespace psched
