#include "core/json_out.h"

namespace psched {

namespace {

// The length of the UTF-8 sequence starting at s[i] if it is well formed (shortest form, no
// surrogates, at most U+10FFFF), else 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const auto continuation = [&](size_t k) { return k < s.size() && (byte(k) & 0xC0) == 0x80; };
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return continuation(i + 1) ? 2 : 0;
  if (b >= 0xE0 && b <= 0xEF) {
    if (!continuation(i + 1) || !continuation(i + 2)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b == 0xED && b1 >= 0xA0) return 0;  // a surrogate
    return 3;
  }
  if (b >= 0xF0 && b <= 0xF4) {
    if (!continuation(i + 1) || !continuation(i + 2) || !continuation(i + 3)) return 0;
    const unsigned char b1 = byte(i + 1);
    if (b == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b == 0xF4 && b1 >= 0x90) return 0;  // past U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace

void JsonText::quoted(std::string_view s) {
  out_ += '"';
  for (size_t i = 0; i < s.size();) {
    // A run of bytes that go out as they are, appended at once (most strings are one run).
    size_t plain = i;
    while (plain < s.size()) {
      const auto p = static_cast<unsigned char>(s[plain]);
      if (p < 0x20 || p >= 0x80 || p == '"' || p == '\\') break;
      ++plain;
    }
    out_.append(s.data() + i, plain - i);
    if ((i = plain) == s.size()) break;
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x80) {
      const size_t n = utf8_sequence(s, i);
      if (n == 0) {
        out_ += "\xEF\xBF\xBD";  // U+FFFD for a byte that starts no well-formed sequence
        ++i;
      } else {
        out_.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out_ += "\\\""; break;
      case '\\': out_ += "\\\\"; break;
      case '\b': out_ += "\\b"; break;
      case '\f': out_ += "\\f"; break;
      case '\n': out_ += "\\n"; break;
      case '\r': out_ += "\\r"; break;
      case '\t': out_ += "\\t"; break;
      default:  // another control character: the run above stops only at these
        fmt::format_to(std::back_inserter(out_), "\\u{:04x}", unsigned(u));
    }
    ++i;
  }
  out_ += '"';
}

}  // namespace psched
