// libFuzzer target: what a stored array's files hold, read as the client and the workers read them.
// The user writes these files, so any bytes must give a value or a one-line message, never a crash,
// an exception or a read past the input. Byte 0 picks the reader (fuzz_storage's seeds in
// tests/fuzz/make_corpus.cpp follow this layout):
//   0  parse_npy_header(rest)     accepted: its data offset lies inside the input
//   1  parse_zarray(rest)         accepted: 1 or 2 dimensions, chunks > 0, and what zarray_json
//                                 writes of it reads back the same
//   2  parse_typestr(rest)        accepted: typestr() of it reads back the same
//   3  ZarrDecoder::decode        compressor byte 1 (% 3), chunk size 1 + le32 at bytes 2-5 (% 1 MiB),
//                                 the chunk file's bytes from byte 14
//   4  decode_blosc_range         the same, with two ranges [a, b) then [b, c) from le32s at bytes 6-9
//                                 and 10-13 (pieces of rows, as a worker reads a big chunk); where
//                                 the whole decode succeeds too, the pieces hold its bytes
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "storage/npy.h"
#include "storage/typestr.h"
#include "storage/zarr.h"

namespace {

using namespace psched;

[[noreturn]] void fail(const char* what, const std::string& detail = "") {
  std::fprintf(stderr, "fuzz_storage: %s %s\n", what, detail.c_str());
  std::abort();
}

void one_line(const Status& st) {
  if (st.message().empty() || st.message().find('\n') != std::string::npos || st.message().size() > 400)
    fail("not a short one-line message:", st.message());
}

uint32_t le32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void npy(const std::string& text) {
  auto h = parse_npy_header(text);
  if (!h) return one_line(h.status());
  if (h->data_offset > text.size()) fail("npy: the data offset lies past the header's bytes");
  (void)h->elements();
}

void zarray(const std::string& text) {
  auto m = parse_zarray(text);
  if (!m) return one_line(m.status());
  if (m->shape.empty() || m->shape.size() > 2 || m->chunks.size() != m->shape.size()) fail("zarray: dimensions");
  for (uint64_t c : m->chunks)
    if (c == 0) fail("zarray: a chunk side of 0");
  auto again = parse_zarray(zarray_json(*m));
  if (!again) fail("zarray: what zarray_json wrote does not read back:", again.message());
  if (again->shape != m->shape || again->chunks != m->chunks || again->compressor != m->compressor ||
      again->type.dtype != m->type.dtype || again->type.big_endian != m->type.big_endian ||
      again->dimension_separator != m->dimension_separator)
    fail("zarray: what zarray_json wrote reads back otherwise");
}

void type_string(const std::string& text) {
  auto t = parse_typestr(text);
  if (!t) return one_line(t.status());
  auto again = parse_typestr(typestr(*t));
  if (!again || again->dtype != t->dtype || again->big_endian != t->big_endian) fail("typestr: no round trip:", text);
}

void decode(const uint8_t* data, size_t size, bool ranges) {
  if (size < 14) return;
  const auto compressor = static_cast<Compressor>(data[1] % 3);
  const size_t bytes = 1 + le32(data + 2) % (1u << 20);  // a chunk holds an element at least
  const std::string in(reinterpret_cast<const char*>(data + 14), size - 14);
  ZarrDecoder decoder;
  std::vector<unsigned char> whole(bytes);
  const Status whole_st = decoder.decode(ranges ? Compressor::kBlosc : compressor, in, whole.data(), bytes);
  if (!whole_st) one_line(whole_st);
  if (!ranges) return;
  size_t a = le32(data + 6) % (bytes + 1), b = le32(data + 10) % (bytes + 1);
  if (a > b) std::swap(a, b);
  std::vector<unsigned char> piece(bytes);
  decoder.new_chunk();
  for (auto [from, to] : {std::pair{a, b}, std::pair{b, bytes}}) {
    const Status st = decoder.decode_blosc_range(in, bytes, from, to, piece.data() + from);
    if (!st) return one_line(st);
    if (whole_st && std::memcmp(piece.data() + from, whole.data() + from, to - from) != 0)
      fail("blosc: a range's bytes differ from the whole chunk's");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0: npy(rest); break;
    case 1: zarray(rest); break;
    case 2: type_string(rest); break;
    case 3: decode(data, size, false); break;
    default: decode(data, size, true); break;
  }
  return 0;
}
