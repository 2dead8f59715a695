// cpu-floor: what the CPU path costs on this machine with no scheduler, no worker and no network,
// the floors bench/cpu.sh sets the end-to-end figures against:
//   - compute: the DeepOps benchmark's chunks (normal(10, 1), (x + 1)[::2, ::2]) through reduce_chunk_cpu on
//     --threads threads, one chunk per thread at a time, as the CPU backend runs them;
//   - memory: write bandwidth (fill a chunk-sized buffer per thread) and read bandwidth (sum it),
//     and from them the bandwidth floor of create-then-reduce: write every element once, read back
//     the selected rows;
//   - tiny: one-element chunks through reduce_chunk_cpu (the per-chunk cost alone);
//   - loopback: TCP round trip of a small message between two threads (a job needs at least two:
//     client -> scheduler -> worker and back).
// Output: key=value lines, then one line for people.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/chunk_grid.h"
#include "core/job_spec.h"
#include "worker/cpu/kernels.h"
#include "worker/cpu/reduce.h"

using namespace psched;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  uint64_t rows = 24000, cols = 24000, chunk = 4000;
  int repeat = 3;  // best of
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "cpu-floor: %s\nusage: cpu-floor [--threads N] [--size N] [--chunk N] [--repeat N]\n",
               why);
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") usage("the CPU path's floors on this machine");
    if (i + 1 >= argc) usage((flag + " needs a value").c_str());
    const long long v = std::atoll(argv[++i]);
    if (v <= 0) usage((flag + " must be > 0").c_str());
    if (flag == "--threads") a.threads = int(v);
    else if (flag == "--size") a.rows = a.cols = uint64_t(v);
    else if (flag == "--chunk") a.chunk = uint64_t(v);
    else if (flag == "--repeat") a.repeat = int(v);
    else usage(("unknown flag " + flag).c_str());
  }
  return a;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

// Wall time, and CPU time per thread: on a busy machine the second says what the code costs.
struct Timing {
  double wall = 1e300, cpu = 1e300;
  void keep_best(const Timing& t) {
    wall = std::min(wall, t.wall);
    cpu = std::min(cpu, t.cpu);
  }
};

// Runs body(thread) on n threads at once; returns the wall time and the mean CPU time per thread.
template <typename Body>
Timing on_threads(int n, Body body) {
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> cpu(size_t(n), 0.0);
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (!go.load()) std::this_thread::yield();
      const double c0 = thread_cpu_seconds();
      body(t);
      cpu[size_t(t)] = thread_cpu_seconds() - c0;
    });
  while (ready.load() < n) std::this_thread::yield();
  const auto t0 = Clock::now();
  go = true;
  for (auto& th : threads) th.join();
  Timing timing{seconds_since(t0), 0.0};
  for (double c : cpu) timing.cpu += c / n;
  return timing;
}

// All chunks of `spec` through reduce_chunk_cpu on `threads` threads (chunks taken in turn), each
// thread with its own chunk buffer kept from run to run, as the backend's threads keep theirs.
Timing run_chunks(const JobSpec& spec, int threads) {
  static std::vector<ChunkBuffer> scratch = std::vector<ChunkBuffer>(size_t(threads));
  const uint64_t chunks = spec.chunks();
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> sink{0};
  return on_threads(threads, [&](int t) {
    uint64_t count = 0;
    for (uint64_t c; (c = next.fetch_add(1)) < chunks;)
      count += reduce_chunk_cpu(spec, c, scratch[size_t(t)]).count;
    sink += count;
  });
}

struct Bandwidth {
  double write_gbps = 0, read_gbps = 0;
};

Bandwidth memory_bandwidth(int threads, uint64_t bytes_per_thread, int repeat) {
  const uint64_t n = bytes_per_thread / sizeof(double);
  std::vector<std::vector<double>> buffers(size_t(threads), std::vector<double>(n, 1.0));
  Bandwidth best;
  std::atomic<uint64_t> sink{0};
  for (int r = 0; r < repeat; ++r) {
    const double w = on_threads(threads, [&](int t) {
                       std::fill(buffers[t].begin(), buffers[t].end(), 1.5 + r);
                     }).wall;
    const double rd = on_threads(threads, [&](int t) {
      const double* p = buffers[t].data();
      double s[8] = {};
      for (uint64_t i = 0; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) s[l] += p[i + l];
      sink += uint64_t(s[0] + s[7]);
    }).wall;
    const double total = double(bytes_per_thread) * threads / 1e9;
    best.write_gbps = std::max(best.write_gbps, total / w);
    best.read_gbps = std::max(best.read_gbps, total / rd);
  }
  return best;
}

// Receives exactly n bytes, polling (MSG_DONTWAIT) rather than sleeping in recv: the floor is the
// network stack's cost, not a sleeping vCPU's wake-up (tens of microseconds on an idle VM, which
// our daemons avoid the same way, --spin-us).
bool recv_polling(int s, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(s, buf + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += size_t(r);
    } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      return false;
    }
  }
  return true;
}

// Median round trip of a 64-byte message over TCP loopback, in microseconds, both ends polling.
double loopback_rtt_us(int rounds) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 || getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return -1;
  std::thread echo([&] {
    const int s = accept(listener, nullptr, nullptr);
    const int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char buf[64];
    for (int i = 0; i < rounds; ++i) {
      if (!recv_polling(s, buf, sizeof(buf))) break;
      if (send(s, buf, sizeof(buf), 0) != ssize_t(sizeof(buf))) break;
    }
    close(s);
  });
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::vector<double> us;
  if (connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    char buf[64] = {};
    for (int i = 0; i < rounds; ++i) {
      const auto t0 = Clock::now();
      if (send(c, buf, sizeof(buf), 0) != ssize_t(sizeof(buf))) break;
      if (!recv_polling(c, buf, sizeof(buf))) break;
      us.push_back(seconds_since(t0) * 1e6);
    }
  }
  close(c);
  echo.join();
  close(listener);
  if (us.empty()) return -1;
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  JobSpec deepops;  // normal(10, 1), (x + 1)[::2, ::2]
  deepops.rows = a.rows;
  deepops.cols = a.cols;
  deepops.chunk_rows = deepops.chunk_cols = a.chunk;
  if (Status st = validate(deepops); !st) usage(st.message().c_str());
  deepops = normalized(deepops);
  JobSpec fused = deepops;
  fused.fused = true;
  JobSpec tiny;
  tiny.rows = 1;
  tiny.cols = 200000;
  tiny.chunk_rows = tiny.chunk_cols = 1;
  tiny.generator = Generator::kConstant;
  tiny.row_sel = tiny.col_sel = Slice{0, kToEnd, 1};
  tiny = normalized(tiny);

  Timing compute, compute_fused, tiny_s;
  run_chunks(deepops, a.threads);  // warm-up: fault in the chunk buffers
  for (int r = 0; r < a.repeat; ++r) {
    compute.keep_best(run_chunks(deepops, a.threads));
    compute_fused.keep_best(run_chunks(fused, a.threads));
    tiny_s.keep_best(run_chunks(tiny, a.threads));
  }
  const Bandwidth bw = memory_bandwidth(a.threads, deepops.chunk_bytes(), a.repeat);
  // Create-then-reduce touches every element once (write) and the selected rows once (read).
  const double gb = double(deepops.bytes()) / 1e9;
  const double read_share = double((deepops.rows + 1) / 2) / double(deepops.rows);
  const double memory_floor = gb / (gb / bw.write_gbps + gb * read_share / bw.read_gbps);
  const double rtt = loopback_rtt_us(2000);

  std::printf("kernel_isa=%s\n", cpu_kernels().isa);
  std::printf("threads=%d\n", a.threads);
  std::printf("deepops_bytes=%llu\n", (unsigned long long)deepops.bytes());
  std::printf("compute_seconds=%.6f\n", compute.wall);
  std::printf("compute_gbps=%.3f\n", gb / compute.wall);
  std::printf("compute_cpu_gbps=%.3f\n", gb / compute.cpu);  // had each thread had its core
  std::printf("fused_compute_gbps=%.3f\n", gb / compute_fused.wall);
  std::printf("fused_compute_cpu_gbps=%.3f\n", gb / compute_fused.cpu);
  std::printf("mem_write_gbps=%.3f\n", bw.write_gbps);
  std::printf("mem_read_gbps=%.3f\n", bw.read_gbps);
  std::printf("memory_floor_gbps=%.3f\n", memory_floor);
  std::printf("tiny_chunks_per_second=%.0f\n", double(tiny.cols) / tiny_s.wall);
  std::printf("loopback_rtt_us=%.1f\n", rtt);
  std::printf("cpu-floor: %s, %d threads: DeepOps benchmark %.2f GB/s in process (%.2f by CPU time; fused %.2f), "
              "memory floor %.2f GB/s (write %.2f, read %.2f); 1-element chunks %.0f/s; loopback "
              "round trip %.1f us\n",
              cpu_kernels().isa, a.threads, gb / compute.wall, gb / compute.cpu,
              gb / compute_fused.wall, memory_floor, bw.write_gbps, bw.read_gbps,
              double(tiny.cols) / tiny_s.wall, rtt);
  return 0;
}
