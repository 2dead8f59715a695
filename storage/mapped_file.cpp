#include "storage/mapped_file.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

namespace psched {
namespace {

// The jump of the read_mapped() under way on this thread, for the SIGBUS handler (initial-exec:
// no allocation on first use, safe in a handler).
__attribute__((tls_model("initial-exec"))) thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_old_bus {};
std::once_flag g_bus_installed;

void on_bus(int sig, siginfo_t* info, void*) {
  if (sigjmp_buf* jump = t_jump) {
    t_jump = nullptr;
    siglongjmp(*jump, 1);
  }
  // Not a read under read_mapped(): the action there was before ours. A fault runs its
  // instruction again and meets it; a signal sent (kill) is raised again.
  sigaction(SIGBUS, &g_old_bus, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void install_bus_handler() {
  struct sigaction a {};
  a.sa_sigaction = on_bus;
  // SA_NODEFER: SIGBUS is not blocked while the handler runs, so the jump out of it leaves the
  // mask as it was and read_mapped() need not save it (a system call a piece).
  a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&a.sa_mask);
  sigaction(SIGBUS, &a, &g_old_bus);
}

// The process's mappings, most recently used first. A mapping costs address space and page
// tables (2 MB a mapped GB), not memory: the pages are the page cache's. 16 files: an npy stack's
// readers move through its files, and a file left behind is unmapped once its readers let go. A
// mapping also holds its file: one deleted keeps its disk space while mapped, so mappings not
// used for a while are dropped too (unmap_idle_files()).
class MappingCache {
 public:
  static constexpr size_t kFiles = 16;
  std::shared_ptr<const MappedFile> get(const std::string& path, int fd, const struct stat& st, Status& status) {
    const FileIdentity id(st);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (it->path != path) continue;
        if (it->map->id == id) {
          it->used = std::chrono::steady_clock::now();
          entries_.splice(entries_.begin(), entries_, it);
          return entries_.front().map;
        }
        entries_.erase(it);
        break;
      }
    }
    if (st.st_size <= 0) {
      status = Status::error(fmt::format("{}: empty, nothing to map", path));
      return nullptr;
    }
    void* p = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      status = Status::error(fmt::format("{}: mmap: {}", path, std::strerror(errno)));
      return nullptr;
    }
    auto map = std::make_shared<const MappedFile>(static_cast<const unsigned char*>(p), uint64_t(st.st_size), id);
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return e.path == path; });  // another thread's, meanwhile
    entries_.push_front(Entry{path, map, std::chrono::steady_clock::now()});
    if (entries_.size() > kFiles) entries_.pop_back();
    return map;
  }
  void drop_idle(std::chrono::steady_clock::duration idle) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(entries_, [&](const Entry& e) { return now - e.used >= idle; });
  }

 private:
  struct Entry {
    std::string path;
    std::shared_ptr<const MappedFile> map;  // its id: the file it was made of
    std::chrono::steady_clock::time_point used;
  };
  std::mutex mutex_;
  std::list<Entry> entries_;
};

MappingCache& mappings() {
  static MappingCache* cache = new MappingCache;  // never destroyed: readers may outlive statics
  return *cache;
}

}  // namespace

MappedFile::~MappedFile() { ::munmap(const_cast<unsigned char*>(data), size_t(size)); }

std::shared_ptr<const MappedFile> map_file(const std::string& path, int fd, const struct stat& st, Status& status) {
  return mappings().get(path, fd, st, status);
}

void unmap_idle_files(std::chrono::steady_clock::duration idle) { mappings().drop_idle(idle); }

bool read_mapped(void (*read)(void* context), void* context) {
  std::call_once(g_bus_installed, install_bus_handler);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) return false;  // SIGBUS: the handler cleared t_jump and jumped here
  t_jump = &jump;
  read(context);
  t_jump = nullptr;
  return true;
}

ReadWays::Way ReadWays::next() {
  if (policy_ == Policy::kPread) return Way::kPread;
  if (policy_ == Policy::kMap) return Way::kMap;
  const uint64_t n = pieces_++;
  if (n < kProbes) return n % 2 == 0 ? Way::kPread : Way::kMap;
  const Way best = cheaper();
  const Way other = best == Way::kPread ? Way::kMap : Way::kPread;
  const double ratio = ns_per_byte_[int(other)] / ns_per_byte_[int(best)];
  const uint64_t every = ratio >= 2.0 ? kExploreFar : kExploreEvery;
  return n % every == 0 ? other : best;
}

void ReadWays::took(Way way, uint64_t bytes, std::chrono::nanoseconds time) {
  if (bytes == 0) return;
  const double sample = double(time.count()) / double(bytes);
  double& avg = ns_per_byte_[int(way)];
  avg = samples_[int(way)]++ == 0 ? sample : avg + (sample - avg) / 4;
}

ReadWays::Way ReadWays::cheaper() const {
  if (samples_[0] == 0 || samples_[1] == 0) return Way::kPread;
  return ns_per_byte_[int(Way::kMap)] < ns_per_byte_[int(Way::kPread)] ? Way::kMap : Way::kPread;
}

ReadWays::Policy ReadWays::default_policy() {
  const char* way = std::getenv("PSCHED_TEST_READ_WAY");
  if (way == nullptr) return Policy::kChoose;
  if (std::string_view(way) == "map") return Policy::kMap;
  if (std::string_view(way) == "pread") return Policy::kPread;
  return Policy::kChoose;
}

}  // namespace psched
