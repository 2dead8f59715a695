// Checks that stay on in every build type, after kj's debug.h: PSCHED_ASSERT(cond, values...) for
// an invariant of our own code (a bug if it fails), PSCHED_REQUIRE(cond, values...) for what a
// caller must have ensured. A failed check logs the kind, file:line, the condition and the named
// values, then aborts: a scheduler whose bookkeeping is wrong must stop rather than hand out wrong
// sums. `assert` compiles out of RelWithDebInfo and guards nothing in production; these never do,
// so they are for cheap conditions. Input from peers, files and flags is never checked this way:
// it is validated and refused with a message (status.h).
#pragma once

#include <fmt/format.h>

#include <string>

namespace psched::detail {

[[noreturn]] void check_failed(const char* kind, const char* file, int line, const char* condition,
                               const std::string& values);

inline std::string check_values(const char*) { return {}; }

template <typename... Values>
std::string check_values(const char* names, const Values&... values) {
  std::string out = fmt::format("; {} = ", names);
  const char* sep = "";
  ((out += fmt::format("{}{}", sep, values), sep = ", "), ...);
  return out;
}

}  // namespace psched::detail

#define PSCHED_CHECK_IMPL_(kind, cond, ...)                                                    \
  do {                                                                                         \
    if (!(cond)) [[unlikely]]                                                                  \
      ::psched::detail::check_failed(kind, __FILE__, __LINE__, #cond,                          \
                                     ::psched::detail::check_values(#__VA_ARGS__ __VA_OPT__(, ) \
                                                                        __VA_ARGS__));         \
  } while (false)

#define PSCHED_ASSERT(cond, ...) PSCHED_CHECK_IMPL_("assertion failed", cond, __VA_ARGS__)
#define PSCHED_REQUIRE(cond, ...) PSCHED_CHECK_IMPL_("precondition failed", cond, __VA_ARGS__)

namespace psched {

// The value `map` holds at `key`, which it must hold: a missing key is a bug, reported like a
// failed PSCHED_ASSERT at the caller's line (map.at() would throw instead, and a connection's
// handler would catch that and close a peer, hiding the bug). The caller's place comes from
// __builtin_FILE/__builtin_LINE (g++ and clang alike; clang 14 has no std::source_location).
template <typename Map, typename Key>
auto& must_find(Map& map, const Key& key, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  auto it = map.find(key);
  if (it == map.end()) [[unlikely]]
    detail::check_failed("assertion failed", file, line, "the key is in the map", detail::check_values("key", key));
  return it->second;
}

}  // namespace psched
