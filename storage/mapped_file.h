// Flat files read through a mapping (mmap) instead of pread: the CPU backend reduces a piece of
// rows straight from the page cache, without pread's copy into its buffer. On a 16-core H200 host
// 16 threads summed a mapped 16 GB .npy at 123-130 GB/s against pread's 78 (the copy is bound per
// thread by the kernel), but on a 2-core VM mapping ran at a quarter of pread (its page faults and
// 4 KiB pages under nested paging): so a reader times both ways on its first pieces and keeps the
// faster (ReadWays), trying the other now and then. A file cut short while mapped raises SIGBUS on
// the page past its new end; reads through a mapping run under read_mapped(), which turns that
// into an error (the chunk fails with its path, as pread's short read does), never a crash.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace psched {

// The file a mapping was made of: a file replaced (a new inode), rewritten or cut short (size,
// times) is mapped afresh.
struct FileIdentity {
  dev_t dev;
  ino_t ino;
  off_t size;
  timespec mtime, ctime;
  explicit FileIdentity(const struct stat& st)
      : dev(st.st_dev), ino(st.st_ino), size(st.st_size), mtime(st.st_mtim), ctime(st.st_ctim) {}
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec;
  }
};

// A whole file mapped read-only, unmapped when the last holder lets go.
struct MappedFile {
  MappedFile(const unsigned char* d, uint64_t n, const FileIdentity& i) : data(d), size(n), id(i) {}
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const unsigned char* const data;
  const uint64_t size;
  const FileIdentity id;  // two mappings of one identity hold the same bytes
};

// The mapping of the file open at `fd` (`st`: its fstat, taken when it was opened for this chunk;
// `path` names it in errors). Mappings are kept for the process, one per path, while the file is
// the same (device, inode, size, modification and change times), so a later chunk or job of the
// file reads pages already mapped; a file replaced or rewritten gets a new one. An empty file, or
// one the system will not map, returns null with the reason in `status`.
std::shared_ptr<const MappedFile> map_file(const std::string& path, int fd, const struct stat& st, Status& status);

// Drops the process's mappings that no reader has asked for in `idle` (their readers keep theirs
// to the end of their chunks): a mapped file deleted keeps its disk space until unmapped. The
// worker calls it with every heartbeat (kIdleMappingSeconds).
void unmap_idle_files(std::chrono::steady_clock::duration idle);
inline constexpr int kIdleMappingSeconds = 30;

// Runs read(context), which reads through mappings only, and returns false, with whatever read()
// was doing abandoned, where a read raised SIGBUS (a file cut short under its mapping). read()
// must hold no lock and own nothing it would leave behind. SIGBUS outside it takes its old course.
bool read_mapped(void (*read)(void* context), void* context);

// How a reader reads its next piece of rows: pread into its buffer, or through the file's mapping.
// Each way's cost per byte (its read and reduce, as timed by the caller) is kept as a moving
// average; the first kProbes pieces take turns, then the cheaper way reads and the other is tried
// again every kExploreEvery pieces (every kExploreFar when it cost twice as much or more), so a
// change (a mapping's pages faulted in on a first pass, mapped for free on later ones) is seen.
class ReadWays {
 public:
  enum class Way { kPread, kMap };
  enum class Policy { kChoose, kPread, kMap };  // kPread / kMap: tests and benchmarks
  static constexpr uint32_t kProbes = 8;
  static constexpr uint32_t kExploreEvery = 64;
  static constexpr uint32_t kExploreFar = 512;

  // Files smaller than this are read, not mapped, unless the policy is kMap: a mapping made and
  // dropped for each small file costs more than its pages (an npy stack of 1 MB files on this VM:
  // mapped 2.0 GB/s against pread's 10.4, and the munmaps, timed against whichever piece came
  // next, misled the choice: 5.7).
  static constexpr uint64_t kMinMappedBytes = uint64_t{64} << 20;

  explicit ReadWays(Policy policy = default_policy(), uint64_t min_mapped_bytes = kMinMappedBytes)
      : policy_(policy), min_mapped_bytes_(policy == Policy::kMap ? 0 : min_mapped_bytes) {}
  // Whether a file of `bytes` may be mapped at all.
  bool maps(uint64_t bytes) const { return policy_ != Policy::kPread && bytes >= min_mapped_bytes_; }
  Way next();
  void took(Way way, uint64_t bytes, std::chrono::nanoseconds time);
  // The way the averages favour now (kPread until both are measured).
  Way cheaper() const;

  // PSCHED_TEST_READ_WAY=map or pread forces a way for the process's readers (tests, benchmarks);
  // unset, they choose.
  static Policy default_policy();

 private:
  Policy policy_;
  uint64_t min_mapped_bytes_;
  uint64_t pieces_ = 0;
  double ns_per_byte_[2] = {0, 0};
  uint32_t samples_[2] = {0, 0};
};

}  // namespace psched
