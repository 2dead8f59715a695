// Zarr v2 directory stores: the .zarray metadata (shape, chunks, dtype, compressor, fill_value,
// order, filters, dimension_separator) and the chunk codecs we read: none, zstd (libzstd) and blosc
// with any of its compressors (libblosc). Read by the client to describe a job (storage/open.h), by
// workers to decode chunks (storage/chunk_reader.cpp), and written by pbench --write-zarr.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/source.h"
#include "core/status.h"
#include "storage/typestr.h"

namespace psched {

struct ZarrMeta {
  ElementType type;
  std::vector<uint64_t> shape, chunks;  // 1-D or 2-D
  Compressor compressor = Compressor::kNone;
  std::string blosc_cname = "lz4";  // writing: blosc's inner compressor
  int level = 1;                    // writing: the compression level
  uint64_t fill_bits = 0;
  bool has_fill_value = true;
  char dimension_separator = '.';
};

// The store's .zarray; the message names the path and what is wrong or not supported.
StatusOr<ZarrMeta> read_zarray(const std::string& dir);
StatusOr<ZarrMeta> parse_zarray(const std::string& text);  // a .zarray's text; the message names no path
std::string zarray_json(const ZarrMeta& meta);  // what write_zarr writes

// A chunk file's name inside the store (array chunk indices i, j; 1-D stores use j alone).
std::string zarr_chunk_key(const StoredArray& array, uint64_t i, uint64_t j);

// Decodes chunk files. One per thread: it keeps its zstd context.
class ZarrDecoder {
 public:
  ZarrDecoder();
  ~ZarrDecoder();
  ZarrDecoder(const ZarrDecoder&) = delete;
  ZarrDecoder& operator=(const ZarrDecoder&) = delete;
  // Decompresses `in` into out, which must come to exactly `bytes`; else the message says why
  // (corrupt, or of another size).
  Status decode(Compressor compressor, const std::string& in, void* out, size_t bytes);

  // Bytes [begin, end) of what a blosc chunk `in` decodes to (`bytes` in all) into out, for a
  // chunk read a piece of rows at a time: only the blosc blocks the range covers are decompressed,
  // and a block the range ends inside is kept, so the next range (the chunk's next piece) does not
  // decompress it again (blosc items that do not fit the range: the chunk decoded whole once).
  // Call new_chunk() when `in` holds another chunk. Checks as decode() does.
  Status decode_blosc_range(const std::string& in, size_t bytes, size_t begin, size_t end, void* out);
  void new_chunk() { block_index_ = kNoBlock; }

 private:
  struct Zstd;
  std::unique_ptr<Zstd> zstd_;
  static constexpr size_t kNoBlock = ~size_t{0}, kWholeChunk = kNoBlock - 1;
  // The blosc block in block_ (or the whole chunk), of the chunk decode_blosc_range last saw.
  size_t block_index_ = kNoBlock;
  std::vector<unsigned char> block_;
};

// Compresses `bytes` at `in` as `meta` says, into out.
Status zarr_encode(const ZarrMeta& meta, const void* in, size_t bytes, std::string& out);

}  // namespace psched
