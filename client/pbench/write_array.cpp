#include "write_array.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "storage/npy.h"
#include "storage/zarr.h"
#include "worker/cpu/kernels.h"

namespace pbench {
namespace {

using psched::StatusOr;
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

StatusOr<NpyTarget> open_npy_target(const std::string& path) {
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

// Where write_zarr() writes: a new directory PATH.partial-PID beside PATH (same parent, so rename()
// puts it in place whole), renamed to PATH once every chunk and .zarray are in it. What may be at
// PATH already decides the rest:
//   - nothing, or an empty directory: rename() puts the store there (it replaces an empty
//     directory), so PATH never holds half a store;
//   - a Zarr array store (a directory holding .zarray; through a symbolic link, the one it names):
//     replaced, as writing into it replaced its chunks before, but whole: the two directories are
//     exchanged at once and the old store then removed, so no chunk of an older grid stays behind;
//   - anything else (a file, a directory of other things): refused before anything is written, as
//     it is not ours to remove and a store written into it would be mixed with what it holds.
struct StoreTarget {
  std::string final_path;  // what the finished store is renamed to
  std::string written;     // the temporary directory every file is written into
  bool replaces_store = false;
};

bool holds_zarray(const std::string& dir) {
  struct stat st;
  return ::stat((dir + "/.zarray").c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_empty_directory(const std::string& dir) {
  std::error_code ec;
  return std::filesystem::is_empty(dir, ec) && !ec;
}

// Removes a tree pbench wrote, or the store it replaced; symbolic links in it are removed, never
// followed.
std::error_code remove_tree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return ec;
}

StatusOr<StoreTarget> make_store_target(const std::string& path) {
  auto failed = [&] { return Status::invalid(fmt::format("--write-zarr {}: {}", path, std::strerror(errno))); };
  StoreTarget t;
  t.final_path = path;
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return failed();
  if (exists) {
    if (!S_ISDIR(st.st_mode) || !(is_empty_directory(path) || holds_zarray(path)))
      return Status::invalid(fmt::format(
          "--write-zarr {}: exists and is neither a Zarr array store (.zarray) nor an empty directory; not replaced",
          path));
    t.replaces_store = !is_empty_directory(path);
    char* real = ::realpath(path.c_str(), nullptr);  // through a symbolic link, the store it names
    if (real == nullptr) return failed();
    t.final_path = real;
    std::free(real);
  }
  // Named PATH.partial-PID, which no reader takes for the store and which says what it is should a
  // killed pbench leave it behind.
  const std::string stem = t.final_path + ".partial-" + std::to_string(::getpid());
  for (int attempt = 0;; ++attempt) {
    t.written = attempt == 0 ? stem : stem + "-" + std::to_string(attempt);
    if (::mkdir(t.written.c_str(), 0755) == 0) break;
    if (errno != EEXIST || attempt == 99) return failed();
  }
  // A store replaced keeps its directory's permissions.
  if (exists && ::chmod(t.written.c_str(), st.st_mode & 07777) != 0) {
    const Status failure = failed();
    ::rmdir(t.written.c_str());
    return failure;
  }
  return t;
}

// Puts the finished store at t.final_path and says where the store it replaced now lies ("" when
// none). On a failure the old store is still at t.final_path and the new one at t.written.
StatusOr<std::string> put_store_in_place(const StoreTarget& t, const std::string& label) {
  auto failed = [&] { return Status::error(fmt::format("{}: {}", label, std::strerror(errno))); };
  if (!t.replaces_store) {
    if (::rename(t.written.c_str(), t.final_path.c_str()) != 0) return failed();
    return std::string();
  }
  if (::renameat2(AT_FDCWD, t.written.c_str(), AT_FDCWD, t.final_path.c_str(), RENAME_EXCHANGE) == 0)
    return t.written;  // the old store lies where the new one was written
  // A file system without the exchange (EINVAL there): the old store goes aside first, and back
  // should the new one not go in.
  if (errno != EINVAL && errno != ENOSYS) return failed();
  const std::string aside = t.written + ".replaced";
  if (::rename(t.final_path.c_str(), aside.c_str()) != 0) return failed();
  if (::rename(t.written.c_str(), t.final_path.c_str()) != 0) {
    const Status failure = failed();
    ::rename(aside.c_str(), t.final_path.c_str());
    return failure;
  }
  return aside;
}

psched::StatusOr<psched::ZarrMeta> zarr_meta(const psched::JobSpec& s, const std::string& compressor) {
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
  return meta;
}

// Every chunk, then .zarray, into the directory `dir`; a failure's message begins with `label`.
Status write_zarr_files(const psched::JobSpec& s, const psched::ZarrMeta& meta, const std::string& dir,
                        const std::string& label) {
  psched::StoredArray keys;
  const psched::ChunkGrid grid = s.grid();
  const uint64_t eb = s.element_bytes(), chunk_elements = s.chunk_rows * s.chunk_cols;
  auto write_file = [&](const std::string& file, const std::string& bytes) {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return Status::error(fmt::format("{}: {}", label, std::strerror(errno)));
    Status w = write_all(fd, bytes.data(), bytes.size(), 0, label);
    if (::close(fd) != 0 && w) w = Status::error(fmt::format("{}: {}", label, std::strerror(errno)));
    return w;
  };
  Status st = in_parallel(grid.chunks(), [&](uint64_t chunk) {
    thread_local std::vector<double> scratch;
    thread_local std::vector<char> bytes;
    thread_local std::string encoded;
    const psched::ChunkBox box = grid.box(chunk);
    bytes.assign(chunk_elements * eb, 0);  // an edge chunk is stored whole, padded with the fill value 0
    for (uint64_t r = 0; r < box.rows; ++r)
      generate(s, (box.row0 + r) * s.cols + box.col0, box.cols, scratch, bytes.data() + r * s.chunk_cols * eb);
    if (Status e = psched::zarr_encode(meta, bytes.data(), bytes.size(), encoded); !e) return e;
    return write_file(dir + "/" + psched::zarr_chunk_key(keys, chunk / grid.grid_cols(), chunk % grid.grid_cols()),
                      encoded);
  });
  if (!st) return st;
  return write_file(dir + "/.zarray", psched::zarray_json(meta));
}

}  // namespace

Status write_npy(const psched::JobSpec& s, const std::string& path) {
  StatusOr<NpyTarget> target = open_npy_target(path);
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
  const StatusOr<psched::ZarrMeta> meta = zarr_meta(s, compressor);
  if (!meta) return meta.status();
  const StatusOr<StoreTarget> target = make_store_target(path);
  if (!target) return target.status();
  const StoreTarget& t = *target;
  // Failures name the path the user gave, never the temporary one.
  const std::string label = "--write-zarr " + path;
  const Status st = write_zarr_files(s, *meta, t.written, label);
  const StatusOr<std::string> replaced = st ? put_store_in_place(t, label) : StatusOr<std::string>(st);
  if (!replaced) {
    remove_tree(t.written);  // ours alone: nothing that was at `path` was ever written into
    return Status::error(replaced.message() + "; the partial store was removed");
  }
  if (replaced->empty()) return Status::ok();
  if (const std::error_code ec = remove_tree(*replaced))
    return Status::error(fmt::format("{}: written, but the store it replaced is left at {}: {}", label, *replaced,
                                     ec.message()));
  return Status::ok();
}

}  // namespace pbench
