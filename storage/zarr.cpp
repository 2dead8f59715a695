#include "storage/zarr.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "storage/regular_file.h"

namespace psched {
namespace {

using json = nlohmann::json;

// The fill value as the element's bytes, little-endian (what a missing chunk's elements are).
StatusOr<uint64_t> fill_bits(const json& v, DType d) {
  auto bits_of = [](auto x) {
    uint64_t out = 0;
    std::memcpy(&out, &x, sizeof x);
    return out;
  };
  if (d == DType::kFloat64 || d == DType::kFloat32) {
    double x = 0;
    if (v.is_number()) x = v.get<double>();
    else if (v == "NaN") x = std::numeric_limits<double>::quiet_NaN();
    else if (v == "Infinity") x = std::numeric_limits<double>::infinity();
    else if (v == "-Infinity") x = -std::numeric_limits<double>::infinity();
    else return Status::invalid(fmt::format("fill_value {} is not a number", printable(v.dump())));
    return d == DType::kFloat64 ? bits_of(x) : bits_of(float(x));
  }
  if (d == DType::kBool) {
    if (v.is_boolean()) return uint64_t(v.get<bool>());
    if (v.is_number_integer()) return uint64_t(v.get<int64_t>() != 0);
    return Status::invalid(fmt::format("fill_value {} is not a boolean", printable(v.dump())));
  }
  if (v.is_number_unsigned()) return v.get<uint64_t>() & (element_bytes(d) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * element_bytes(d))) - 1);
  if (v.is_number_integer()) {
    const uint64_t raw = uint64_t(v.get<int64_t>());
    return element_bytes(d) == 8 ? raw : raw & ((uint64_t{1} << (8 * element_bytes(d))) - 1);
  }
  return Status::invalid(fmt::format("fill_value {} is not an integer", printable(v.dump())));
}

StatusOr<std::vector<uint64_t>> dims(const json& v, const char* what) {
  if (!v.is_array() || v.empty() || v.size() > 2)
    return Status::invalid(fmt::format("{} must list 1 or 2 dimensions (N-D stores are not supported) (got {})",
                                       what, printable(v.dump())));
  std::vector<uint64_t> out;
  for (const json& d : v) {
    if (!d.is_number_unsigned())
      return Status::invalid(fmt::format("{} holds {} (expected integers >= 0)", what, printable(d.dump())));
    out.push_back(d.get<uint64_t>());
  }
  return out;
}

// A member's value: `fallback` where the key is absent, an error where it holds another kind of
// value. nlohmann's value() throws there, and a .zarray is the user's file: it gets a message.
StatusOr<std::string> string_member(const json& j, const char* key, const char* fallback) {
  if (!j.contains(key)) return std::string(fallback);
  if (!j[key].is_string())
    return Status::invalid(fmt::format("{} is {}, not a string", key, printable(j[key].dump())));
  return j[key].get<std::string>();
}

}  // namespace

StatusOr<ZarrMeta> parse_zarray(const std::string& text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::invalid("not valid JSON");
  ZarrMeta m;
  if (!j.contains("zarr_format") || !j["zarr_format"].is_number_integer() || j["zarr_format"].get<int64_t>() != 2)
    return Status::invalid("zarr_format must be 2");
  if (!j.contains("shape") || !j.contains("chunks") || !j.contains("dtype"))
    return Status::invalid("lacks shape, chunks or dtype");
  auto shape = dims(j["shape"], "shape");
  if (!shape) return shape.status();
  auto chunks = dims(j["chunks"], "chunks");
  if (!chunks) return chunks.status();
  if (chunks->size() != shape->size()) return Status::invalid("chunks and shape differ in dimensions");
  for (uint64_t c : *chunks)
    if (c == 0) return Status::invalid("chunks must be > 0");
  m.shape = *shape;
  m.chunks = *chunks;
  if (!j["dtype"].is_string()) return Status::invalid("structured dtypes are not supported");
  auto t = parse_typestr(j["dtype"].get<std::string>());
  if (!t) return t.status();
  m.type = *t;
  auto order = string_member(j, "order", "C");
  if (!order) return order.status();
  if (*order != "C") return Status::invalid("order must be \"C\" (Fortran-ordered chunks are not supported)");
  if (j.contains("filters") && !j["filters"].is_null() && !(j["filters"].is_array() && j["filters"].empty()))
    return Status::invalid(fmt::format("filters {} are not supported", printable(j["filters"].dump())));
  const json& c = j.contains("compressor") ? j["compressor"] : json();
  const auto id = c.is_object() ? string_member(c, "id", "") : StatusOr<std::string>(std::string());
  if (c.is_null()) {
    m.compressor = Compressor::kNone;
  } else if (id && *id == "zstd") {
    m.compressor = Compressor::kZstd;
  } else if (id && *id == "blosc") {
    m.compressor = Compressor::kBlosc;
    auto cname = string_member(c, "cname", "lz4");
    if (!cname) return Status::invalid(fmt::format("compressor's {}", cname.message()));
    m.blosc_cname = *cname;
  } else {
    return Status::invalid(
        fmt::format("compressor {} is not supported (expected null, zstd or blosc)", printable(c.dump())));
  }
  const json fill = j.contains("fill_value") ? j["fill_value"] : json();
  if (fill.is_null()) {
    m.has_fill_value = false;
  } else {
    auto bits = fill_bits(fill, m.type.dtype);
    if (!bits) return bits.status();
    m.fill_bits = *bits;
  }
  auto sep = string_member(j, "dimension_separator", ".");
  if (!sep) return sep.status();
  if (*sep != "." && *sep != "/") return Status::invalid("dimension_separator must be \".\" or \"/\"");
  m.dimension_separator = (*sep)[0];
  return m;
}

StatusOr<ZarrMeta> read_zarray(const std::string& dir) {
  const std::string path = dir + "/.zarray";
  struct stat st {};
  Status opened;
  int error = 0;
  const int fd = open_regular(path, st, opened, error);
  if (fd < 0) return Status::invalid(opened.message() + (error == ENOENT ? " (not a Zarr v2 array)" : ""));
  // Metadata of a few hundred bytes; a larger file is not a .zarray we could use.
  constexpr uint64_t kMaxZarrayBytes = 1 << 20;
  std::string text(std::min<uint64_t>(uint64_t(st.st_size), kMaxZarrayBytes + 1), '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  error = errno;
  ::close(fd);
  if (n < 0) return Status::invalid(fmt::format("{}: {}", path, std::strerror(error)));
  if (uint64_t(n) > kMaxZarrayBytes) return Status::invalid(fmt::format("{}: larger than 1 MiB", path));
  text.resize(size_t(n));
  auto m = parse_zarray(text);
  if (!m) return Status::invalid(fmt::format("{}: {}", path, m.message()));
  return m;
}

std::string zarray_json(const ZarrMeta& m) {
  json j;
  j["zarr_format"] = 2;
  j["shape"] = m.shape;
  j["chunks"] = m.chunks;
  j["dtype"] = typestr(m.type);
  j["order"] = "C";
  j["filters"] = nullptr;
  j["fill_value"] = 0;
  j["dimension_separator"] = std::string(1, m.dimension_separator);
  switch (m.compressor) {
    case Compressor::kNone: j["compressor"] = nullptr; break;
    case Compressor::kZstd: j["compressor"] = {{"id", "zstd"}, {"level", m.level}}; break;
    case Compressor::kBlosc:
      j["compressor"] = {{"id", "blosc"}, {"cname", m.blosc_cname}, {"clevel", m.level}, {"shuffle", 1}, {"blocksize", 0}};
      break;
  }
  return j.dump(4) + "\n";
}

std::string zarr_chunk_key(const StoredArray& a, uint64_t i, uint64_t j) {
  if (a.one_dimensional) return std::to_string(j);
  return fmt::format("{}{}{}", i, a.dimension_separator, j);
}

}  // namespace psched
