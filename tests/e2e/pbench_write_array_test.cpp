// pbench --write-npy and --write-zarr (client/pbench/write_array.*) when writing fails (issue 44):
// what pbench wrote is removed, what was at the path is as it was, a device at the path is never
// removed, and one line names the path and the OS error. A disk that fills is stood in for by a
// file size limit (RLIMIT_FSIZE, through the shell's ulimit, with SIGXFSZ ignored so that the write
// fails with EFBIG instead of killing pbench), which needs no root; a real full disk (a 1 MiB tmpfs
// in a mount namespace of its own) needs root, as CI has, and is skipped with a warning otherwise.
#include <catch2/catch.hpp>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/test_cluster.h"

using namespace psched::test;

namespace {

// 1000 x 1000 float64: an 8 MB file, far past the limits below.
const std::vector<std::string> kArray = {"--generator", "arange", "-x", "1000", "-y", "1000"};

std::vector<std::string> write_npy_to(const std::string& path) {
  std::vector<std::string> argv = {bin_dir() + "/pbench"};
  argv.insert(argv.end(), kArray.begin(), kArray.end());
  argv.insert(argv.end(), {"--write-npy", path});
  return argv;
}

// `pbench` run with files limited to 64 blocks of 512 or 1024 bytes (the shell's unit).
TimedRun run_limited(const std::vector<std::string>& pbench) {
  std::vector<std::string> argv = {"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 64 && exec \"$0\" \"$@\""};
  argv.insert(argv.end(), pbench.begin(), pbench.end());
  return run_timed(argv);
}

TimedRun write_npy_limited(const std::string& path) { return run_limited(write_npy_to(path)); }

// `pbench` run with the directory `dir` a 1 MiB tmpfs, in a mount namespace of its own that goes
// with it; `out` gets pbench's output, "exit N", then what pbench left on the tmpfs (`ls -A`).
// False, with a warning, where that cannot be done here (no root, no unshare, no tmpfs).
bool run_on_full_tmpfs(const std::string& dir, const std::vector<std::string>& pbench, std::string* out) {
  if (geteuid() != 0 || run_command({"/usr/bin/unshare", "-m", "/bin/true"}, out) != 0) {
    WARN("skipped: needs root and unshare to mount a small tmpfs in a mount namespace of its own");
    return false;
  }
  std::vector<std::string> argv = {"/usr/bin/unshare", "-m", "/bin/sh", "-c",
                                   "d=$1; shift; mount -t tmpfs -o size=1m tmpfs \"$d\" || exit 77; "
                                   "\"$@\"; echo \"exit $?\"; ls -A \"$d\"",
                                   "sh", dir};
  argv.insert(argv.end(), pbench.begin(), pbench.end());
  const int status = run_command(argv, out);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    WARN("skipped: could not mount a tmpfs here: " + *out);
    return false;
  }
  return true;
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

std::string contents_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// 1000 x 1000 float64 in four uncompressed Zarr chunks of 2 MB, each far past the limits above.
const std::vector<std::string> kZarrArray = {"--generator", "arange", "-x", "1000", "-y", "1000",
                                             "--chunk-x", "250", "--chunk-y", "1000", "--compressor", "none"};
const std::vector<std::string> kZarrFiles = {".zarray", "0.0", "1.0", "2.0", "3.0"};

std::vector<std::string> write_zarr_to(const std::string& path) {
  std::vector<std::string> argv = {bin_dir() + "/pbench"};
  argv.insert(argv.end(), kZarrArray.begin(), kZarrArray.end());
  argv.insert(argv.end(), {"--write-zarr", path});
  return argv;
}

// A store as an older run (another grid) left it: .zarray and a chunk key the new grid lacks.
void make_old_store(const std::string& path) {
  REQUIRE(std::filesystem::create_directory(path));
  std::ofstream(path + "/.zarray") << "the user's old metadata";
  std::ofstream(path + "/0.0") << "the user's old chunk";
  std::ofstream(path + "/9.0") << "a chunk of another grid";
  REQUIRE(chmod(path.c_str(), 0750) == 0);
}

int exit_code(const TimedRun& run) { return WIFEXITED(run.status) ? WEXITSTATUS(run.status) : -1; }

}  // namespace

TEST_CASE("a --write-npy cut short by a file size limit removes what it wrote and names the path and the error",
          "[pbench][write-npy]") {
  TempDir dir;
  const std::string path = dir.path + "/a.npy";
  const TimedRun run = write_npy_limited(path);
  INFO(run.out);
  CHECK(exit_code(run) == 1);
  CHECK(run.out == "pbench: --write-npy " + path + ": File too large; the partial file was removed\n");
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("a --write-npy over an existing file that fails leaves that file as it was", "[pbench][write-npy]") {
  TempDir dir;
  const std::string path = dir.path + "/a.npy";
  std::ofstream(path) << "an array the user had";
  REQUIRE(chmod(path.c_str(), 0600) == 0);
  const TimedRun run = write_npy_limited(path);
  INFO(run.out);
  CHECK(exit_code(run) == 1);
  CHECK(names_in(dir.path) == std::vector<std::string>{"a.npy"});
  CHECK(contents_of(path) == "an array the user had");
}

TEST_CASE("a --write-npy that succeeds leaves only the file, with an existing file's permissions and links kept",
          "[pbench][write-npy]") {
  TempDir dir;
  const std::string real = dir.path + "/real.npy", link = dir.path + "/link.npy";
  std::ofstream(real) << "old";
  REQUIRE(chmod(real.c_str(), 0600) == 0);
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  std::string out;
  REQUIRE(run_command(write_npy_to(link), &out) == 0);
  CHECK(names_in(dir.path) == std::vector<std::string>{"link.npy", "real.npy"});
  CHECK(std::filesystem::is_symlink(link));
  struct stat st;
  REQUIRE(stat(real.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(st.st_size == 128 + 8 * 1000 * 1000);  // the .npy header, then the elements
}

TEST_CASE("a --write-npy to a device writes in place and never removes it", "[pbench][write-npy]") {
  std::string out;
  CHECK(run_command(write_npy_to("/dev/null"), &out) == 0);
  struct stat st;
  REQUIRE(stat("/dev/null", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));

  if (access("/dev/full", W_OK) != 0) {
    WARN("skipped the /dev/full half: /dev/full is not writable here");
    return;
  }
  const int status = run_command(write_npy_to("/dev/full"), &out);
  INFO(out);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 1);
  CHECK(out == "pbench: --write-npy /dev/full: No space left on device\n");
  REQUIRE(stat("/dev/full", &st) == 0);
  CHECK(S_ISCHR(st.st_mode));
}

TEST_CASE("a --write-npy onto a full file system removes what it wrote and says there is no space left",
          "[pbench][write-npy]") {
  TempDir dir;
  const std::string path = dir.path + "/a.npy";
  std::string out;
  if (!run_on_full_tmpfs(dir.path, write_npy_to(path), &out)) return;
  CHECK(out == "pbench: --write-npy " + path + ": No space left on device; the partial file was removed\nexit 1\n");
}

TEST_CASE("a --write-zarr cut short by a file size limit removes the whole partial store and names the path",
          "[pbench][write-zarr]") {
  TempDir dir;
  const std::string path = dir.path + "/a.zarr";
  const TimedRun run = run_limited(write_zarr_to(path));
  INFO(run.out);
  CHECK(exit_code(run) == 1);
  CHECK(run.out == "pbench: --write-zarr " + path + ": File too large; the partial store was removed\n");
  CHECK(names_in(dir.path).empty());
}

TEST_CASE("a --write-zarr over an existing store that fails leaves that store as it was", "[pbench][write-zarr]") {
  TempDir dir;
  const std::string path = dir.path + "/a.zarr";
  make_old_store(path);
  const TimedRun run = run_limited(write_zarr_to(path));
  INFO(run.out);
  CHECK(exit_code(run) == 1);
  CHECK(names_in(dir.path) == std::vector<std::string>{"a.zarr"});
  CHECK(names_in(path) == std::vector<std::string>{".zarray", "0.0", "9.0"});
  CHECK(contents_of(path + "/.zarray") == "the user's old metadata");
  CHECK(contents_of(path + "/0.0") == "the user's old chunk");
}

TEST_CASE("a --write-zarr that succeeds leaves only the store, whole, also in an empty directory made for it",
          "[pbench][write-zarr]") {
  TempDir dir;
  const std::string path = dir.path + "/a.zarr", made = dir.path + "/made.zarr";
  REQUIRE(std::filesystem::create_directory(made));
  REQUIRE(chmod(made.c_str(), 0700) == 0);
  for (const std::string& p : {path, made}) {
    std::string out;
    REQUIRE(run_command(write_zarr_to(p), &out) == 0);
    CHECK(names_in(p) == kZarrFiles);
    CHECK(std::filesystem::file_size(p + "/3.0") == 250 * 1000 * 8);
    CHECK(contents_of(p + "/.zarray").find("\"chunks\": [\n        250,") != std::string::npos);
  }
  CHECK(names_in(dir.path) == std::vector<std::string>{"a.zarr", "made.zarr"});
  struct stat st;
  REQUIRE(stat(made.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0700);
}

TEST_CASE("a --write-zarr over an existing store replaces it whole, keeping its permissions and links",
          "[pbench][write-zarr]") {
  TempDir dir;
  const std::string real = dir.path + "/real.zarr", link = dir.path + "/link.zarr";
  make_old_store(real);
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  std::string out;
  REQUIRE(run_command(write_zarr_to(link), &out) == 0);
  CHECK(names_in(dir.path) == std::vector<std::string>{"link.zarr", "real.zarr"});
  CHECK(std::filesystem::is_symlink(link));
  CHECK(names_in(real) == kZarrFiles);  // the old grid's 9.0 is gone
  CHECK(contents_of(real + "/0.0").size() == 250 * 1000 * 8);
  struct stat st;
  REQUIRE(stat(real.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0750);
}

TEST_CASE("a --write-zarr onto a path that holds no store is refused and leaves it as it was",
          "[pbench][write-zarr]") {
  TempDir dir;
  const std::string notes = dir.path + "/notes", file = dir.path + "/file.zarr";
  REQUIRE(std::filesystem::create_directory(notes));
  std::ofstream(notes + "/todo.txt") << "the user's notes";
  std::ofstream(file) << "a file";
  for (const std::string& path : {notes, file}) {
    std::string out;
    const int status = run_command(write_zarr_to(path), &out);
    INFO(out);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 2);
    CHECK(out == "pbench: --write-zarr " + path +
                     ": exists and is neither a Zarr array store (.zarray) nor an empty directory; not replaced\n");
  }
  CHECK(names_in(dir.path) == std::vector<std::string>{"file.zarr", "notes"});
  CHECK(names_in(notes) == std::vector<std::string>{"todo.txt"});
  CHECK(contents_of(file) == "a file");
}

TEST_CASE("a --write-zarr onto a full file system removes the partial store and says there is no space left",
          "[pbench][write-zarr]") {
  TempDir dir;
  const std::string path = dir.path + "/a.zarr";
  std::string out;
  if (!run_on_full_tmpfs(dir.path, write_zarr_to(path), &out)) return;
  CHECK(out == "pbench: --write-zarr " + path + ": No space left on device; the partial store was removed\nexit 1\n");
}
