#include "write_array.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
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

using psched::Result;
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

// Where write_npy() writes: a regular file (new or existing, or what a symbolic link names) is
// written under a temporary name beside it, in the same directory so that rename() can put it in
// place whole; anything else that exists (a device such as /dev/null or /dev/full, a FIFO) is
// written in place, since it cannot be replaced and was not ours to remove.
struct NpyTarget {
  std::string final_path;  // what the finished file is renamed to ("" when written in place)
  std::string written;     // the path opened for writing
  int fd = -1;
};

Result<NpyTarget> open_npy_target(const std::string& path) {
  auto failed = [&](const std::string& what) {
    return Status::invalid(fmt::format("--write-npy {}: {}", what, std::strerror(errno)));
  };
  NpyTarget t;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    t.written = path;
    t.fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (t.fd < 0) return failed(path);
    return t;
  }
  t.final_path = path;
  if (exists) {  // through a symbolic link, the file it names is replaced, and the link kept
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr) return failed(path);
    t.final_path = real;
    std::free(real);
  }
  // Named PATH.partial-PID, which no .npy reader takes (not ending in .npy) and which says what it
  // is should a killed pbench leave it behind.
  const std::string stem = t.final_path + ".partial-" + std::to_string(::getpid());
  for (int attempt = 0; t.fd < 0; ++attempt) {
    t.written = attempt == 0 ? stem : stem + "-" + std::to_string(attempt);
    t.fd = ::open(t.written.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (t.fd < 0 && (errno != EEXIST || attempt == 99)) return failed(path);
  }
  // A file replaced keeps its permissions, as it did when it was truncated and written in place.
  if (exists && ::fchmod(t.fd, st.st_mode & 07777) != 0) {
    const Status failure = failed(path);
    ::close(t.fd);
    ::unlink(t.written.c_str());
    return failure;
  }
  return t;
}

// The .npy into `fd`; a failure's message begins with `label`.
Status write_npy_body(const psched::JobSpec& s, int fd, const std::string& label) {
  const std::string header = psched::npy_header(element_type(s), false, {s.rows, s.cols});
  const uint64_t eb = s.element_bytes();
  if (Status st = write_all(fd, header.data(), header.size(), 0, label); !st) return st;
  const uint64_t elements = s.rows * s.cols;
  return in_parallel((elements + kPieceElements - 1) / kPieceElements, [&](uint64_t k) {
    thread_local std::vector<double> scratch;
    thread_local std::vector<char> bytes;
    const uint64_t first = k * kPieceElements, n = std::min(kPieceElements, elements - first);
    bytes.resize(n * eb);
    generate(s, first, n, scratch, bytes.data());
    return write_all(fd, bytes.data(), n * eb, header.size() + first * eb, label);
  });
}

}  // namespace

Status write_npy(const psched::JobSpec& s, const std::string& path) {
  Result<NpyTarget> target = open_npy_target(path);
  if (!target) return target.status();
  const NpyTarget& t = *target;
  // Failures name the path the user gave, never the temporary one.
  Status st = write_npy_body(s, t.fd, "--write-npy " + path);
  if (::close(t.fd) != 0 && st) st = Status::error(fmt::format("--write-npy {}: {}", path, std::strerror(errno)));
  if (t.final_path.empty()) return st;
  if (st && ::rename(t.written.c_str(), t.final_path.c_str()) != 0)
    st = Status::error(fmt::format("--write-npy {}: {}", path, std::strerror(errno)));
  if (st) return st;
  ::unlink(t.written.c_str());  // ours alone: `path` itself was never opened
  return Status::error(st.message() + "; the partial file was removed");
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
