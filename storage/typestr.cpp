#include "storage/typestr.h"

#include <fmt/format.h>

namespace psched {

StatusOr<ElementType> parse_typestr(const std::string& s) {
  auto refuse = [&](const char* why) {
    return Status::invalid(fmt::format("element type '{}' is not supported ({}; expected float64, float32, "
                                       "int8-int64, uint8-uint64 or bool)",
                                       printable(s, 24), why));
  };
  if (s.size() < 3) return refuse("too short");
  ElementType t;
  switch (s[0]) {
    case '<': case '|': case '=': t.big_endian = false; break;
    case '>': t.big_endian = true; break;
    default: return refuse("no byte order");
  }
  const char kind = s[1];
  const std::string size = s.substr(2);
  if (kind == 'f' && size == "8") t.dtype = DType::kFloat64;
  else if (kind == 'f' && size == "4") t.dtype = DType::kFloat32;
  else if (kind == 'i' && size == "1") t.dtype = DType::kInt8;
  else if (kind == 'i' && size == "2") t.dtype = DType::kInt16;
  else if (kind == 'i' && size == "4") t.dtype = DType::kInt32;
  else if (kind == 'i' && size == "8") t.dtype = DType::kInt64;
  else if (kind == 'u' && size == "1") t.dtype = DType::kUInt8;
  else if (kind == 'u' && size == "2") t.dtype = DType::kUInt16;
  else if (kind == 'u' && size == "4") t.dtype = DType::kUInt32;
  else if (kind == 'u' && size == "8") t.dtype = DType::kUInt64;
  else if (kind == 'b' && size == "1") t.dtype = DType::kBool;
  else return refuse(kind == 'f' && size == "2" ? "float16" : kind == 'c' ? "complex" : "unknown kind or size");
  if (element_bytes(t.dtype) == 1) t.big_endian = false;
  return t;
}

std::string typestr(ElementType t) {
  const uint64_t bytes = element_bytes(t.dtype);
  const char order = bytes == 1 ? '|' : t.big_endian ? '>' : '<';
  char kind = 'f';
  switch (t.dtype) {
    case DType::kFloat64: case DType::kFloat32: kind = 'f'; break;
    case DType::kInt8: case DType::kInt16: case DType::kInt32: case DType::kInt64: kind = 'i'; break;
    case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64: kind = 'u'; break;
    case DType::kBool: kind = 'b'; break;
  }
  return fmt::format("{}{}{}", order, kind, bytes);
}

}  // namespace psched
