// ZarrDecoder::decode_blosc_range (storage/zarr.h): a blosc chunk decoded a range of bytes at a
// time, as the CPU backend reads a Zarr chunk in pieces of rows, against the chunk decoded whole:
// lz4 and zstd inside, blocks smaller than a row, not dividing the rows, larger than the chunk,
// and a chunk stored as is (clevel 0); ranges in order with gaps, out of order and one byte wide.
// Corrupt chunks (bytes flipped in the data and the header, cut short) give an error or some bytes,
// never a read outside the buffer (the sanitizer build runs this); blosc items of 3 bytes, which
// do not fit a row's range, still give the right bytes.
#include <catch2/catch.hpp>

#include <blosc.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "storage/zarr.h"

using namespace psched;

namespace {

std::string compress(const std::vector<double>& x, const char* cname, int clevel, size_t blocksize) {
  const size_t bytes = x.size() * sizeof(double);
  std::string out(bytes + BLOSC_MAX_OVERHEAD, '\0');
  const int n = blosc_compress_ctx(clevel, BLOSC_SHUFFLE, sizeof(double), bytes, x.data(), out.data(), out.size(),
                                   cname, blocksize, 1);
  REQUIRE(n > 0);
  out.resize(size_t(n));
  return out;
}

}  // namespace

TEST_CASE("a blosc chunk decoded a range at a time gives the bytes of the chunk decoded whole", "[zarr][stored]") {
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> normal(10, 1);
  std::vector<double> x(300 * 1000);  // 300 rows of 8000 bytes
  for (double& v : x) v = normal(rng);
  const size_t bytes = x.size() * sizeof(double), row = 8000;
  struct Case {
    const char* cname;
    int clevel;
    size_t blocksize;
  };
  for (const Case c : {Case{"lz4", 5, 0}, Case{"zstd", 1, 0}, Case{"lz4", 1, 4096}, Case{"lz4", 5, 24000},
                       Case{"lz4", 5, 2 << 20}, Case{"lz4", 0, 0}}) {
    INFO(c.cname << " clevel " << c.clevel << " blocksize " << c.blocksize);
    const std::string in = compress(x, c.cname, c.clevel, c.blocksize);
    ZarrDecoder decoder;
    std::vector<unsigned char> whole(bytes);
    REQUIRE(decoder.decode(Compressor::kBlosc, in, whole.data(), bytes).is_ok());
    REQUIRE(std::memcmp(whole.data(), x.data(), bytes) == 0);
    auto check = [&](size_t begin, size_t end) {
      INFO("bytes [" << begin << ", " << end << ")");
      std::vector<unsigned char> got(end - begin + 1, 0xa5);
      const Status st = decoder.decode_blosc_range(in, bytes, begin, end, got.data());
      INFO(st.message());
      REQUIRE(st.is_ok());
      CHECK(std::memcmp(got.data(), whole.data() + begin, end - begin) == 0);
      CHECK(got[end - begin] == 0xa5);  // nothing written past the range
    };
    decoder.new_chunk();
    // Pieces of 13 rows in order, every third row skipped between them (a row step's gaps).
    for (size_t r = 0; r < 300; r += 14) check(r * row, std::min<size_t>(r + 13, 300) * row);
    // The same chunk out of order, and ranges of one item, after new_chunk() and without.
    for (const auto& [a, b] : {std::pair<size_t, size_t>{250, 260}, {3, 4}, {299, 300}, {0, 300}, {100, 101}})
      check(a * row, b * row);
    decoder.new_chunk();
    check(8, 16);
    check(bytes - 8, bytes);
    check(0, 0);
  }
}

TEST_CASE("a corrupt blosc chunk decoded a range at a time gives an error or bytes, never a read outside it",
          "[zarr][stored]") {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> x(64 * 1000);
  for (double& v : x) v = normal(rng);
  const size_t bytes = x.size() * sizeof(double);
  ZarrDecoder decoder;
  std::vector<unsigned char> out(bytes);
  for (const size_t blocksize : {size_t{0}, size_t{4096}}) {
    const std::string good = compress(x, "lz4", 5, blocksize);
    // Cut short: the header's compressed size no longer matches.
    const Status cut = decoder.decode_blosc_range(good.substr(0, good.size() - 1), bytes, 0, 8000, out.data());
    CHECK_FALSE(cut.is_ok());
    CHECK(cut.message().find("corrupt blosc data") != std::string::npos);
    // Another chunk size than the store says.
    CHECK_FALSE(decoder.decode_blosc_range(good, bytes + 8, 0, 8, out.data()).is_ok());
    // Bytes flipped past the header's sizes (block offsets, stream lengths, compressed data), and
    // in its flags, item size and block size.
    std::uniform_int_distribution<size_t> where(16, good.size() - 1);
    const size_t header[] = {2, 3, 8, 9, 10, 11};
    int failed = 0;
    for (int k = 0; k < 400; ++k) {
      std::string bad = good;
      for (int f = 0; f < 1 + k % 4; ++f) bad[where(rng)] ^= char(1 + rng() % 255);
      if (k % 4 == 3) bad[header[rng() % 6]] ^= char(1 + rng() % 255);
      decoder.new_chunk();
      for (size_t r = 0; r < 64; r += 9)
        if (!decoder.decode_blosc_range(bad, bytes, r * 8000, std::min<size_t>(r + 8, 64) * 8000, out.data()))
          ++failed;
    }
    CHECK(failed > 0);
  }
  // Items of 3 bytes (a store written so): a range they do not fit is cut from the chunk decoded
  // whole, kept for the chunk's next range.
  std::string odd(bytes + BLOSC_MAX_OVERHEAD, '\0');
  const int n = blosc_compress_ctx(5, BLOSC_SHUFFLE, 3, bytes, x.data(), odd.data(), odd.size(), "lz4", 4000, 1);
  REQUIRE(n > 0);
  odd.resize(size_t(n));
  decoder.new_chunk();
  for (const auto& [a, b] : {std::pair<size_t, size_t>{0, 8000}, {8000, 24000}, {3, 9}, {bytes - 16, bytes}}) {
    INFO("bytes [" << a << ", " << b << ")");
    std::vector<unsigned char> got(b - a);
    REQUIRE(decoder.decode_blosc_range(odd, bytes, a, b, got.data()).is_ok());
    CHECK(std::memcmp(got.data(), reinterpret_cast<const unsigned char*>(x.data()) + a, b - a) == 0);
  }
}
