// Flat files reduced where they lie in their mappings (storage/mapped_file.h): which pieces a
// reader views, the process's mappings kept while a file is the same and made afresh once it is
// replaced or rewritten, dropped once idle (a deleted file's space comes back), a file cut short under its mapping failing the read (SIGBUS caught) and
// never the process, a SIGBUS elsewhere still taking its old course, and a reader's choice
// between pread and the mapping. The bits of mapped reads against pread's are
// stored_pieces_test.cpp's.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "storage/chunk_reader.h"
#include "storage/mapped_file.h"
#include "storage/npy.h"
#include "tests/support/stored_files.h"
#include "worker/cpu/reduce.h"

using namespace psched;
using namespace psched::stored_test;

namespace {

std::vector<double> iota(uint64_t n, double from) {
  std::vector<double> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = from + double(i);
  return v;
}

void write_npy(const fs::path& p, uint64_t rows, uint64_t cols, double from, DType dtype = DType::kFloat64) {
  const std::vector<double> x = iota(rows * cols, from);
  if (dtype == DType::kFloat32) {
    const std::vector<float> f(x.begin(), x.end());
    write_bytes(p, npy_header({dtype, false}, false, {rows, cols}) + bytes_of(f));
  } else {
    write_bytes(p, npy_header({dtype, false}, false, {rows, cols}) + bytes_of(x));
  }
}

struct Viewed {
  Status status;
  const double* at = nullptr;
  uint64_t ld = 0;
};

// The files here are small: a reader maps them where its policy is kMap (ReadWays::kMinMappedBytes).
Viewed view(ChunkReader& reader, const JobSpec& s, uint64_t chunk, const ChunkBox& box,
            ChunkReader::Piece piece = ChunkReader::Piece::kFirst) {
  reader.ways() = ReadWays(ReadWays::Policy::kMap);
  Viewed v;
  v.status = reader.view(s, chunk, box, piece, v.at, v.ld);
  return v;
}

// A piece that must be viewed: where it lies in the mapping.
const double* viewed_at(ChunkReader& reader, const JobSpec& s, uint64_t chunk, const ChunkBox& box) {
  const Viewed v = view(reader, s, chunk, box);
  INFO(v.status.message());
  REQUIRE(v.status.is_ok());
  REQUIRE(v.at != nullptr);
  CHECK(v.ld == s.cols);
  return v.at;
}

struct Touch {
  const double* at;
  uint64_t n;
  double sum = 0;
  static void read(void* context) {
    auto& t = *static_cast<Touch*>(context);
    for (uint64_t i = 0; i < t.n; i += 512) t.sum += t.at[i];
  }
};

}  // namespace

TEST_CASE("a reader views a float64 file's rows in its mapping, at the box's first element, rows the array's width apart",
          "[stored][mapped]") {
  TempDir dir("psched-mapped-view-");
  write_npy(dir.path / "x.npy", 40, 8, 0.0);
  const JobSpec s = normalized(opened(dir.path / "x.npy", 20, 4));
  REQUIRE(ChunkReader::views(s));
  ChunkReader reader;
  const double* at = viewed_at(reader, s, 3, ChunkBox{25, 10, 4, 4});
  CHECK(at[0] == 25 * 8 + 4);
  CHECK(at[3] == 25 * 8 + 7);
  CHECK(at[9 * 8 + 3] == 34 * 8 + 7);
  // Past the file's end: read()'s "truncated" line, and nothing to read.
  JobSpec longer = s;
  longer.rows = 41;
  const Viewed past = view(reader, longer, 4, ChunkBox{40, 1, 0, 8});
  CHECK_FALSE(past.status.is_ok());
  CHECK(past.status.message().find("chunk 4: ") == 0);
  CHECK(past.status.message().find("truncated: needs bytes up to") != std::string::npos);
  CHECK(past.at == nullptr);
}

TEST_CASE("a reader that chooses maps no file under 64 MiB", "[stored][mapped]") {
  TempDir dir("psched-mapped-small-");
  write_npy(dir.path / "x.npy", 40, 8, 0.0);
  const JobSpec s = normalized(opened(dir.path / "x.npy", 20, 8));
  ChunkReader reader;
  reader.ways() = ReadWays(ReadWays::Policy::kChoose);
  const double* at = &s.scale;
  uint64_t ld = 0;
  REQUIRE(reader.view(s, 0, ChunkBox{0, 20, 0, 8}, ChunkReader::Piece::kFirst, at, ld).is_ok());
  CHECK(at == nullptr);
}

TEST_CASE("only flat float64 files in the host's order are viewed (narrower dtypes too, for a GPU), and a stack's piece inside one file",
          "[stored][mapped]") {
  TempDir dir("psched-mapped-which-");
  write_npy(dir.path / "f.npy", 40, 8, 0.0, DType::kFloat32);
  CHECK_FALSE(ChunkReader::views(normalized(opened(dir.path / "f.npy"))));
  write_bytes(dir.path / "big.npy", npy_header({DType::kFloat64, true}, false, {4, 4}) + std::string(128, '\0'));
  CHECK_FALSE(ChunkReader::views(normalized(opened(dir.path / "big.npy"))));
  write_bytes(dir.path / "fortran.npy", npy_header({DType::kFloat64, false}, true, {4, 4}) + std::string(128, '\0'));
  CHECK_FALSE(ChunkReader::views(normalized(opened(dir.path / "fortran.npy"))));
  // Raw elements 4 bytes into the file: not aligned for doubles, read instead.
  write_bytes(dir.path / "x.raw", std::string(4 + 16 * 8, '\0'));
  ArrayInput raw = raw_input(dir.path / "x.raw", "float64", {4, 4}, 4);
  auto opened_raw = open_array(raw);
  REQUIRE(opened_raw.is_ok());
  CHECK_FALSE(ChunkReader::views(normalized(whole_array_job(*opened_raw))));
  raw.offset = 8;
  write_bytes(dir.path / "x.raw", std::string(8 + 16 * 8, '\0'));
  opened_raw = open_array(raw);
  REQUIRE(opened_raw.is_ok());
  CHECK(ChunkReader::views(normalized(whole_array_job(*opened_raw))));

  // A GPU takes narrower dtypes as stored (views_as_stored): in the host's order (any order for
  // a byte), aligned for their own size; not 64-bit integers, whose rounding the host measures.
  CHECK(ChunkReader::views_as_stored(normalized(opened(dir.path / "f.npy"))));
  CHECK(ChunkReader::views_as_stored(normalized(whole_array_job(*opened_raw))));
  CHECK_FALSE(ChunkReader::views_as_stored(normalized(opened(dir.path / "big.npy"))));
  CHECK_FALSE(ChunkReader::views_as_stored(normalized(opened(dir.path / "fortran.npy"))));
  for (const auto& [dtype, order, offset, viewed] :
       {std::tuple{"int16", "little", 2, true}, std::tuple{"int16", "big", 2, false}, std::tuple{"int16", "little", 1, false},
        std::tuple{"uint8", "big", 1, true}, std::tuple{"bool", "little", 3, true}, std::tuple{"int64", "little", 8, false},
        std::tuple{"float32", "little", 6, false}}) {
    INFO(dtype << " " << order << " at " << offset);
    write_bytes(dir.path / "n.raw", std::string(size_t(offset) + 16 * 8, '\0'));
    ArrayInput narrow = raw_input(dir.path / "n.raw", dtype, {4, 4}, uint64_t(offset));
    narrow.byte_order = order;
    auto opened_narrow = open_array(narrow);
    REQUIRE(opened_narrow.is_ok());
    CHECK(ChunkReader::views_as_stored(normalized(whole_array_job(*opened_narrow))) == viewed);
  }

  fs::create_directories(dir.path / "stack");
  write_npy(dir.path / "stack" / "0.npy", 10, 8, 0.0);
  write_npy(dir.path / "stack" / "1.npy", 10, 8, 80.0);
  const JobSpec s = normalized(opened(dir.path / "stack", 20, 8));
  REQUIRE(ChunkReader::views(s));
  ChunkReader reader;
  CHECK(viewed_at(reader, s, 0, ChunkBox{12, 5, 0, 8})[0] == 96.0);
  const Viewed across = view(reader, s, 0, ChunkBox{8, 4, 0, 8});
  CHECK(across.status.is_ok());
  CHECK(across.at == nullptr);  // rows 8-11 cross from 0.npy into 1.npy: read
}

TEST_CASE("the process keeps a file's mapping while the file is the same, and maps it afresh once replaced",
          "[stored][mapped]") {
  TempDir dir("psched-mapped-cache-");
  write_npy(dir.path / "x.npy", 40, 8, 0.0);
  write_npy(dir.path / "new.npy", 40, 8, 1000.0);
  const JobSpec s = normalized(opened(dir.path / "x.npy", 20, 8));
  ChunkReader a, b;
  const Viewed first = view(a, s, 0, ChunkBox{0, 20, 0, 8});
  const Viewed again = view(b, s, 1, ChunkBox{0, 20, 0, 8});
  REQUIRE(first.at != nullptr);
  CHECK(again.at == first.at);  // another reader, another chunk: the same mapping
  // A careful writer renames a new file over the old: a later piece of the chunk begun keeps the
  // old file (ChunkReader::Piece::kLater), the next chunk maps the new one.
  fs::rename(dir.path / "new.npy", dir.path / "x.npy");
  const Viewed later = view(a, s, 0, ChunkBox{20, 20, 0, 8}, ChunkReader::Piece::kLater);
  REQUIRE(later.at != nullptr);
  CHECK(later.at[0] == 160.0);
  const Viewed fresh = view(a, s, 2, ChunkBox{20, 20, 0, 8});
  REQUIRE(fresh.at != nullptr);
  CHECK(fresh.at[0] == 1160.0);
}

namespace {
bool mapped_now(const fs::path& path) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(path.string()) != std::string::npos) return true;
  return false;
}
}  // namespace

TEST_CASE("a file deleted is unmapped once its readers let go and the mapping has been idle",
          "[stored][mapped]") {
  TempDir dir("psched-mapped-idle-");
  const fs::path path = dir.path / "x.npy";
  write_npy(path, 40, 8, 0.0);
  const JobSpec s = normalized(opened(path, 20, 8));
  ChunkReader a, b;
  const Viewed first = view(a, s, 0, ChunkBox{0, 20, 0, 8});
  REQUIRE(first.at != nullptr);
  unmap_idle_files(std::chrono::hours(1));  // used just now: kept
  CHECK(view(b, s, 1, ChunkBox{20, 20, 0, 8}).at == first.at + 20 * 8);
  unmap_idle_files(std::chrono::seconds(0));  // dropped from the process's mappings, held by a and b
  const Viewed again = view(b, s, 2, ChunkBox{0, 20, 0, 8});
  REQUIRE(again.at != nullptr);
  CHECK(again.at != first.at);  // mapped afresh: a still holds the first
  fs::remove(path);
  CHECK(mapped_now(path));
  a.release();
  b.release();
  unmap_idle_files(std::chrono::seconds(0));
  CHECK_FALSE(mapped_now(path));
}

TEST_CASE("a file cut short under its mapping fails the read with its path, and the process goes on",
          "[stored][mapped]") {
  TempDir dir("psched-mapped-cut-");
  const fs::path path = dir.path / "x.npy";
  write_npy(path, 1024, 256, 0.0);  // 2 MiB of elements
  const JobSpec s = normalized(opened(path, 1024, 256));
  ChunkReader reader;
  const Viewed v = view(reader, s, 0, ChunkBox{0, 1024, 0, 256});
  REQUIRE(v.at != nullptr);
  Touch whole{v.at, 1024 * 256};
  REQUIRE(read_mapped(&Touch::read, &whole));
  // Cut to its first page while mapped: the pages past it raise SIGBUS when read, twice over (the
  // jump out of the handler leaves SIGBUS unblocked: a fault with it blocked would kill the process).
  REQUIRE(::truncate(path.c_str(), 4096) == 0);
  for (int round = 0; round < 2; ++round) {
    Touch cut{v.at, 1024 * 256};
    CHECK_FALSE(read_mapped(&Touch::read, &cut));
    const Status why = reader.cut_short(0);
    CHECK(why.message().find(path.string()) != std::string::npos);
    CHECK(why.message().find("cut short while being read") != std::string::npos);
  }
  Touch first_page{v.at, 256};
  CHECK(read_mapped(&Touch::read, &first_page));
  // The chunk read again: the file's new size is seen, and the chunk fails as a short file does.
  PartialSum p;
  std::vector<double> scratch;
  reader.ways() = ReadWays(ReadWays::Policy::kMap);
  const Status st = reduce_stored_chunk_cpu(s, 0, reader, scratch, p);
  CHECK_FALSE(st.is_ok());
  CHECK(st.message().find("truncated") != std::string::npos);
}

TEST_CASE("a SIGBUS outside read_mapped still ends the process", "[stored][mapped]") {
  Touch nothing{nullptr, 0};
  REQUIRE(read_mapped(&Touch::read, &nothing));  // the handler installed
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // A sanitizer's report of the deadly signal is expected here: to /dev/null, not to a report
    // file that tests/run.sh would count as a finding.
    const int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) ::dup2(null, 2);
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_set_report_path("stderr");
#endif
    ::raise(SIGBUS);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  // Killed by it, or (under a sanitizer, whose handler was there before ours) exited non-zero.
  CHECK((WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0)));
}

TEST_CASE("a reader takes turns on its first pieces, then reads the cheaper way and tries the other now and then",
          "[stored][mapped]") {
  using Way = ReadWays::Way;
  using namespace std::chrono;
  ReadWays ways;
  ways = ReadWays(ReadWays::Policy::kChoose);
  std::vector<Way> seen;
  // The mapping costs 1 ns a byte, pread 1.5: the mapping is kept, pread tried every 64th piece.
  for (uint32_t i = 0; i < 200; ++i) {
    const Way w = ways.next();
    seen.push_back(w);
    ways.took(w, 1000, nanoseconds(w == Way::kMap ? 1000 : 1500));
  }
  for (uint32_t i = 0; i < ReadWays::kProbes; ++i) CHECK(seen[i] == (i % 2 == 0 ? Way::kPread : Way::kMap));
  CHECK(ways.cheaper() == Way::kMap);
  for (uint32_t i = ReadWays::kProbes; i < 200; ++i)
    CHECK(seen[i] == (i % ReadWays::kExploreEvery == 0 ? Way::kPread : Way::kMap));
  // The mapping turns four times pread's cost: pread wins; once the average has caught up (a try
  // at piece 256 sees it twice pread's), the mapping is tried every 512th.
  for (uint32_t i = 200; i < 1100; ++i) {
    const Way w = ways.next();
    ways.took(w, 1000, nanoseconds(w == Way::kMap ? 6000 : 1500));
    if (i > 256) CHECK(w == (i % ReadWays::kExploreFar == 0 ? Way::kMap : Way::kPread));
  }
  CHECK(ways.cheaper() == Way::kPread);
  CHECK(ReadWays(ReadWays::Policy::kMap).next() == Way::kMap);
  CHECK(ReadWays(ReadWays::Policy::kPread).next() == Way::kPread);
}
