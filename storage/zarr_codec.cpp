// The chunk codecs of storage/zarr.h, apart from the metadata so that the client library, which
// reads metadata only, links no compression library.
#include <blosc.h>
#include <zstd.h>

#include <cstring>

#include <fmt/format.h>

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
