#include "storage/npy.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "storage/regular_file.h"

namespace psched {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// NumPy itself refuses headers past this (numpy.lib.format's _MAX_HEADER_SIZE, as of 1.24).
constexpr uint64_t kMaxHeaderBytes = 10000;

// A cursor over the header's dict literal: only what numpy writes (strings, True/False, tuples of
// integers), so anything else is refused rather than guessed.
struct DictReader {
  const std::string& s;
  size_t i = 0;

  void space() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    space();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool string(std::string& out) {
    space();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    const char q = s[i++];
    const size_t end = s.find(q, i);
    if (end == std::string::npos) return false;
    out = s.substr(i, end - i);
    i = end + 1;
    return true;
  }
  bool word(std::string& out) {
    space();
    const size_t start = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    out = s.substr(start, i - start);
    return !out.empty();
  }
};

}  // namespace

uint64_t NpyHeader::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n = d != 0 && n > UINT64_MAX / d ? UINT64_MAX : n * d;
  return n;
}

StatusOr<NpyHeader> parse_npy_header(const std::string& b) {
  if (b.size() < kMagicBytes + 4 || b.compare(0, kMagicBytes, kMagic) != 0)
    return Status::invalid("not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(b[6]);
  uint64_t len = 0, start = 0;
  if (major == 1) {
    len = uint64_t(static_cast<unsigned char>(b[8])) | uint64_t(static_cast<unsigned char>(b[9])) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return Status::invalid("truncated .npy header");
    for (int k = 0; k < 4; ++k) len |= uint64_t(static_cast<unsigned char>(b[8 + k])) << (8 * k);
    start = 12;
  } else {
    return Status::invalid(fmt::format(".npy format version {} is unknown (expected 1, 2 or 3)", major));
  }
  if (len > kMaxHeaderBytes) return Status::invalid(fmt::format(".npy header of {} bytes is too long", len));
  if (b.size() < start + len) return Status::invalid("truncated .npy header");
  const std::string dict = b.substr(start, len);
  NpyHeader h;
  h.data_offset = start + len;
  DictReader r{dict};
  bool have_descr = false, have_order = false, have_shape = false;
  if (!r.eat('{')) return Status::invalid(".npy header is not a dict");
  while (!r.eat('}')) {
    std::string key;
    if (!r.string(key) || !r.eat(':')) return Status::invalid(".npy header dict is malformed");
    if (key == "descr") {
      std::string descr;
      if (!r.string(descr))
        return Status::invalid(".npy header: structured dtypes are not supported (descr is not a type string)");
      auto t = parse_typestr(descr);
      if (!t) return t.status();
      h.type = *t;
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string v;
      if (!r.word(v) || (v != "True" && v != "False"))
        return Status::invalid(".npy header: fortran_order is not True or False");
      h.fortran_order = v == "True";
      have_order = true;
    } else if (key == "shape") {
      if (!r.eat('(')) return Status::invalid(".npy header: shape is not a tuple");
      while (!r.eat(')')) {
        std::string n;
        if (!r.word(n) || n.size() > 19 || n.find_first_not_of("0123456789") != std::string::npos)
          return Status::invalid(".npy header: shape holds something other than integers");
        h.shape.push_back(std::stoull(n));
        r.eat(',');
      }
      have_shape = true;
    } else {
      return Status::invalid(fmt::format(".npy header: unknown key '{}'", printable(key, 48)));
    }
    r.eat(',');
  }
  if (!have_descr || !have_order || !have_shape)
    return Status::invalid(".npy header lacks descr, fortran_order or shape");
  return h;
}

StatusOr<NpyHeader> read_npy_header(const std::string& path) {
  struct stat st {};
  Status opened;
  int error = 0;
  const int fd = open_regular(path, st, opened, error);
  if (fd < 0) return Status::invalid(opened.message());
  std::string prefix(12 + kMaxHeaderBytes, '\0');
  const ssize_t n = ::pread(fd, prefix.data(), prefix.size(), 0);
  const int err = errno;
  ::close(fd);
  if (n < 0) return Status::invalid(fmt::format("{}: {}", path, std::strerror(err)));
  prefix.resize(size_t(n));
  auto h = parse_npy_header(prefix);
  if (!h) return Status::invalid(fmt::format("{}: {}", path, h.message()));
  return h;
}

std::string npy_header(ElementType type, bool fortran_order, const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) keeps its comma, (3, 4) loses it
  else if (shape.size() == 1) dims.pop_back();
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': ({}), }}", typestr(type),
                                 fortran_order ? "True" : "False", dims);
  const bool v2 = dict.size() + 11 > 65535;
  const size_t prelude = v2 ? 12 : 10;
  const size_t total = (prelude + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prelude - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out(kMagic, kMagicBytes);
  out.push_back(char(v2 ? 2 : 1));
  out.push_back(0);
  const uint64_t len = dict.size();
  for (size_t k = 0; k < (v2 ? 4u : 2u); ++k) out.push_back(char((len >> (8 * k)) & 0xff));
  return out + dict;
}

}  // namespace psched
