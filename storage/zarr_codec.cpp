// The chunk codecs of storage/zarr.h, apart from the metadata so that the client library, which
// reads metadata only, links no compression library.
#include <blosc.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "core/check.h"
#include "storage/zarr.h"

namespace psched {

struct ZarrDecoder::Zstd {
  ZSTD_DCtx* ctx = ZSTD_createDCtx();
  ~Zstd() { ZSTD_freeDCtx(ctx); }
};

ZarrDecoder::ZarrDecoder() : zstd_(std::make_unique<Zstd>()) {}
ZarrDecoder::~ZarrDecoder() = default;

Status ZarrDecoder::decode(Compressor compressor, const std::string& in, void* out, size_t bytes) {
  switch (compressor) {
    case Compressor::kNone:
      if (in.size() != bytes) return Status::error(fmt::format("holds {} bytes, a chunk {}", in.size(), bytes));
      std::memcpy(out, in.data(), bytes);
      return Status::ok();
    case Compressor::kZstd: {
      const unsigned long long size = ZSTD_getFrameContentSize(in.data(), in.size());
      if (size == ZSTD_CONTENTSIZE_ERROR) return Status::error("corrupt zstd data (no frame)");
      if (size != ZSTD_CONTENTSIZE_UNKNOWN && size != bytes)
        return Status::error(fmt::format("zstd frame holds {} bytes, a chunk {}", size, bytes));
      const size_t n = ZSTD_decompressDCtx(zstd_->ctx, out, bytes, in.data(), in.size());
      if (ZSTD_isError(n)) return Status::error(fmt::format("corrupt zstd data ({})", ZSTD_getErrorName(n)));
      if (n != bytes) return Status::error(fmt::format("zstd data holds {} bytes, a chunk {}", n, bytes));
      return Status::ok();
    }
    case Compressor::kBlosc: {
      size_t nbytes = 0;
      if (in.size() < BLOSC_MIN_HEADER_LENGTH || blosc_cbuffer_validate(in.data(), in.size(), &nbytes) != 0)
        return Status::error("corrupt blosc data (bad header)");
      if (nbytes != bytes) return Status::error(fmt::format("blosc data holds {} bytes, a chunk {}", nbytes, bytes));
      const int n = blosc_decompress_ctx(in.data(), out, bytes, 1);
      if (n <= 0 || size_t(n) != bytes)
        return Status::error(fmt::format("corrupt blosc data (decompression returned {})", n));
      return Status::ok();
    }
  }
  return Status::error(fmt::format("compressor code {} is unknown", int(compressor)));
}

Status ZarrDecoder::decode_blosc_range(const std::string& in, size_t bytes, size_t begin, size_t end, void* out) {
  size_t nbytes = 0, cbytes = 0, blocksize = 0, typesize = 0;
  int flags = 0;
  // blosc_cbuffer_validate holds the header's compressed size to in.size(); blosc_getitem reads
  // nothing past that size (it checks every block's offsets and lengths against it).
  if (in.size() < BLOSC_MIN_HEADER_LENGTH || blosc_cbuffer_validate(in.data(), in.size(), &nbytes) != 0)
    return Status::error("corrupt blosc data (bad header)");
  if (nbytes != bytes) return Status::error(fmt::format("blosc data holds {} bytes, a chunk {}", nbytes, bytes));
  blosc_cbuffer_sizes(in.data(), &nbytes, &cbytes, &blocksize);
  blosc_cbuffer_metainfo(in.data(), &typesize, &flags);
  PSCHED_REQUIRE(begin <= end && end <= bytes, begin, end, bytes);
  if (blocksize == 0 || blocksize > bytes)
    return Status::error(fmt::format("corrupt blosc data (blocks of {} bytes in a chunk of {})", blocksize, bytes));
  if (typesize == 0 || blocksize % typesize != 0 || begin % typesize != 0 ||
      end % typesize != 0) {  // blosc's items do not fit the range: the chunk decoded whole, once
    if (block_index_ != kWholeChunk) {
      block_index_ = kNoBlock;
      block_.resize(bytes);
      if (Status st = decode(Compressor::kBlosc, in, block_.data(), bytes); !st) return st;
      block_index_ = kWholeChunk;
    }
    std::memcpy(out, block_.data() + begin, end - begin);
    return Status::ok();
  }
  // Bytes [from, to_byte) into to: blosc_getitem, which decodes only the blocks they are in.
  auto items = [&](size_t from, size_t to_byte, unsigned char* to) -> Status {
    const int n = blosc_getitem(in.data(), int(from / typesize), int((to_byte - from) / typesize), to);
    if (n < 0 || size_t(n) != to_byte - from)
      return Status::error(fmt::format("corrupt blosc data (decompression returned {})", n));
    return Status::ok();
  };
  auto* dst = static_cast<unsigned char*>(out);
  for (size_t at = begin; at < end;) {
    const size_t block = at / blocksize, block_begin = block * blocksize;
    const size_t block_end = std::min(block_begin + blocksize, bytes);
    if (at == block_begin && end >= block_end) {  // whole blocks: straight into out, in one call
      const size_t stop = end == bytes ? bytes : end / blocksize * blocksize;
      if (Status st = items(at, stop, dst); !st) return st;
      dst += stop - at;
      at = stop;
      continue;
    }
    // Part of a block: from the one kept, or decoded into it.
    if (block_index_ != block) {
      block_.resize(blocksize);
      block_index_ = kNoBlock;
      if (Status st = items(block_begin, block_end, block_.data()); !st) return st;
      block_index_ = block;
    }
    const size_t stop = std::min(end, block_end);
    std::memcpy(dst, block_.data() + (at - block_begin), stop - at);
    dst += stop - at;
    at = stop;
  }
  return Status::ok();
}

Status zarr_encode(const ZarrMeta& m, const void* in, size_t bytes, std::string& out) {
  switch (m.compressor) {
    case Compressor::kNone:
      out.assign(static_cast<const char*>(in), bytes);
      return Status::ok();
    case Compressor::kZstd: {
      out.resize(ZSTD_compressBound(bytes));
      const size_t n = ZSTD_compress(out.data(), out.size(), in, bytes, m.level);
      if (ZSTD_isError(n)) return Status::error(fmt::format("zstd: {}", ZSTD_getErrorName(n)));
      out.resize(n);
      return Status::ok();
    }
    case Compressor::kBlosc: {
      out.resize(bytes + BLOSC_MAX_OVERHEAD);
      const int n = blosc_compress_ctx(m.level, BLOSC_SHUFFLE, element_bytes(m.type.dtype), bytes, in, out.data(),
                                       out.size(), m.blosc_cname.c_str(), 0, 1);
      if (n <= 0) return Status::error(fmt::format("blosc could not compress with '{}' ({})", m.blosc_cname, n));
      out.resize(size_t(n));
      return Status::ok();
    }
  }
  return Status::error("unknown compressor");
}

}  // namespace psched
