// The CUDA launchers' preconditions are checks that stop the worker (core/check.h), not exceptions
// that CudaBackend::launch would turn into a chunk failure another worker retries (hiding the
// bug). Each case runs the launcher in a forked child and expects it to abort naming the check;
// the check comes before any CUDA call, so this runs without a GPU (it is not in psched_cuda_tests,
// which skips there).
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <string>

#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "worker/cuda/kernels.cuh"

namespace {

struct ChildEnd {
  bool aborted = false;
  std::string output;  // its stdout and stderr
};

// Runs f in a child with its output into a pipe; how it ended and what it wrote.
ChildEnd run_in_child(const std::function<void()>& f) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    // The check's log line goes where the logger writes (stdout or stderr), and Catch's own
    // SIGABRT handler would report instead of dying: the child dies as a worker would.
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    std::signal(SIGABRT, SIG_DFL);
    f();
    _exit(0);  // returned: the launcher accepted what it must refuse
  }
  close(fds[1]);
  ChildEnd end;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) end.output.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  end.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return end;
}

psched::gpu::BatchWork batch_of(uint32_t count, uint64_t chunk_rows, uint64_t chunk_cols) {
  psched::JobSpec spec;
  spec.rows = chunk_rows * 2;
  spec.cols = chunk_cols;
  spec.chunk_rows = chunk_rows;
  spec.chunk_cols = chunk_cols;
  spec.generator = psched::Generator::kArange;
  spec.row_sel = psched::Slice{0, spec.rows, 1};
  spec.col_sel = psched::Slice{0, spec.cols, 1};
  psched::gpu::BatchWork b;
  b.first = psched::gpu::chunk_work(spec, 0);
  b.count = count;
  b.stride_elements = chunk_rows * chunk_cols;
  return b;
}

}  // namespace

TEST_CASE("a CUDA launcher given an empty batch stops the worker", "[cuda][checks]") {
  const ChildEnd end = run_in_child([] {
    psched::gpu::launch_reduce(batch_of(0, 4, 4), nullptr, nullptr, nullptr, 1, nullptr);
  });
  CHECK(end.aborted);
  CHECK(end.output.find("precondition failed") != std::string::npos);
  CHECK(end.output.find("b.count") != std::string::npos);
}

TEST_CASE("a CUDA launcher given a batch over kMaxBatchChunks stops the worker", "[cuda][checks]") {
  const ChildEnd end = run_in_child([] {
    psched::gpu::launch_generate_batch(batch_of(psched::gpu::kMaxBatchChunks + 1, 4, 4), nullptr, 1, nullptr);
  });
  CHECK(end.aborted);
  CHECK(end.output.find("precondition failed") != std::string::npos);
}

TEST_CASE("a CUDA launcher given a chunk over 2^31 elements stops the worker", "[cuda][checks]") {
  const ChildEnd end = run_in_child([] {
    psched::gpu::launch_generate_batch(batch_of(1, uint64_t{1} << 16, uint64_t{1} << 16), nullptr, 1, nullptr);
  });
  CHECK(end.aborted);
  CHECK(end.output.find("rows * cols <= kMaxChunkElements") != std::string::npos);
}
