#include "write_array.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "storage/npy.h"
#include "storage/zarr.h"
#include "worker/cpu/kernels.h"

namespace pbench {
namespace {

using psched::Status;

constexpr uint64_t kPieceElements = uint64_t{1} << 22;  // generated and written at a time per thread

Status write_all(int fd, const void* data, uint64_t bytes, uint64_t offset, const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd, p + done, bytes - done, off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::error(fmt::format("{}: {}", path, std::strerror(errno)));
    done += uint64_t(n);
  }
  return Status::ok();
}

// Elements first .. first + n - 1 (global linear indices) as the job's dtype stores them, into out.
void generate(const psched::JobSpec& s, uint64_t first, uint64_t n, std::vector<double>& scratch, char* out) {
  const psched::GeneratorParams gen{s.generator, s.param0, s.param1, s.seed};
  const bool to_float = s.dtype == psched::DType::kFloat32;
  scratch.resize(n);
  psched::cpu_kernels().generate(gen, to_float, first, 1, n, scratch.data(), false);
  if (to_float) {
    for (uint64_t i = 0; i < n; ++i) {
      const float f = float(scratch[i]);
      std::memcpy(out + 4 * i, &f, 4);
    }
  } else {
    std::memcpy(out, scratch.data(), 8 * n);
  }
}

// Runs work(k) for k < count on every core; the first failure wins.
template <typename Work>
Status in_parallel(uint64_t count, Work&& work) {
  std::atomic<uint64_t> next{0};
  std::mutex mutex;
  Status failure;
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), unsigned(std::min<uint64_t>(count, 64))));
  for (unsigned t = 0; t < n; ++t)
    threads.emplace_back([&] {
      for (uint64_t k; (k = next.fetch_add(1)) < count;) {
        if (Status st = work(k); !st) {
          std::lock_guard<std::mutex> lock(mutex);
          if (failure.is_ok()) failure = st;
          next = count;
        }
      }
    });
  for (auto& t : threads) t.join();
  return failure;
}

psched::ElementType element_type(const psched::JobSpec& s) { return psched::ElementType{s.dtype, false}; }

}  // namespace

Status write_npy(const psched::JobSpec& s, const std::string& path) {
  const std::string header = psched::npy_header(element_type(s), false, {s.rows, s.cols});
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::invalid(fmt::format("--write-npy {}: {}", path, std::strerror(errno)));
  const uint64_t eb = s.element_bytes();
  Status st = write_all(fd, header.data(), header.size(), 0, path);
  if (st) {
    const uint64_t elements = s.rows * s.cols;
    st = in_parallel((elements + kPieceElements - 1) / kPieceElements, [&](uint64_t k) {
      thread_local std::vector<double> scratch;
      thread_local std::vector<char> bytes;
      const uint64_t first = k * kPieceElements, n = std::min(kPieceElements, elements - first);
      bytes.resize(n * eb);
      generate(s, first, n, scratch, bytes.data());
      return write_all(fd, bytes.data(), n * eb, header.size() + first * eb, path);
    });
  }
  if (::close(fd) != 0 && st) st = Status::error(fmt::format("{}: {}", path, std::strerror(errno)));
  return st;
}

Status write_zarr(const psched::JobSpec& s, const std::string& path, const std::string& compressor) {
  psched::ZarrMeta meta;
  meta.type = element_type(s);
  meta.shape = {s.rows, s.cols};
  meta.chunks = {s.chunk_rows, s.chunk_cols};
  if (compressor == "zstd") {
    meta.compressor = psched::Compressor::kZstd;
    meta.level = 1;  // numcodecs' Zstd default
  } else if (compressor.rfind("blosc-", 0) == 0) {
    meta.compressor = psched::Compressor::kBlosc;
    meta.blosc_cname = compressor.substr(6);
    meta.level = 5;  // numcodecs' Blosc default
  } else if (compressor != "none") {
    return Status::invalid(fmt::format("--compressor '{}' is unknown", compressor));
  }
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::invalid(fmt::format("--write-zarr {}: {}", path, std::strerror(errno)));
  psched::StoredArray keys;
  const psched::ChunkGrid grid = s.grid();
  const uint64_t eb = s.element_bytes(), chunk_elements = s.chunk_rows * s.chunk_cols;
  Status st = in_parallel(grid.chunks(), [&](uint64_t chunk) {
    thread_local std::vector<double> scratch;
    thread_local std::vector<char> bytes;
    thread_local std::string encoded;
    const psched::ChunkBox box = grid.box(chunk);
    bytes.assign(chunk_elements * eb, 0);  // an edge chunk is stored whole, padded with the fill value 0
    for (uint64_t r = 0; r < box.rows; ++r)
      generate(s, (box.row0 + r) * s.cols + box.col0, box.cols, scratch, bytes.data() + r * s.chunk_cols * eb);
    if (Status e = psched::zarr_encode(meta, bytes.data(), bytes.size(), encoded); !e) return e;
    const std::string file =
        path + "/" + psched::zarr_chunk_key(keys, chunk / grid.grid_cols(), chunk % grid.grid_cols());
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::error(fmt::format("{}: {}", file, std::strerror(errno)));
    Status w = write_all(fd, encoded.data(), encoded.size(), 0, file);
    ::close(fd);
    return w;
  });
  if (!st) return st;
  const std::string meta_path = path + "/.zarray";
  const std::string text = psched::zarray_json(meta);
  const int fd = ::open(meta_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::error(fmt::format("{}: {}", meta_path, std::strerror(errno)));
  st = write_all(fd, text.data(), text.size(), 0, meta_path);
  ::close(fd);
  return st;
}

}  // namespace pbench
