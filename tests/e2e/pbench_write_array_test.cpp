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
