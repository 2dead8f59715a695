// io-floor: the floors under a stored array's job (bench/storage.sh), measured on the same machine
// in the same run, without psched:
//   io-floor read FILE [THREADS]  plain pread of the whole file in 64 MiB blocks, then in 1 MiB
//                                 blocks (which stay in a core's cache: 2.4-3 x the rate of 64
//                                 MiB on a 16-core H200 host), by 1, 2, 4, ... threads up to the
//                                 cores, the best rate winning; or one pass in 64 MiB blocks by
//                                 THREADS threads (a cold cache: only the first pass is cold)
//   io-floor zarr DIR THREADS     every chunk file of a Zarr store read and decompressed by THREADS
//                                 threads (storage/zarr.h's decoder, as the workers use it), the
//                                 better of two passes
//   io-floor h2d [GPUS]           pinned host-to-device copies of 256 MiB blocks, on each of the
//                                 first GPUS devices at once (CUDA builds only)
//   io-floor h2d-mapped FILE [GPUS [BLOCK_MIB]]
//                                 the file mapped, each GPU's share of it registered with CUDA
//                                 where it lies (read-only: the page cache's own pages pinned) and
//                                 copied from there, no host copy: the register's rate apart from
//                                 the copies', blocks registered one at a time, then the whole
//                                 share registered once (CUDA builds only; a probe of a road the
//                                 workers do not take yet: bench/README.md)
// Each prints one key=value line per figure, in GB/s (10^9 bytes a second).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "storage/zarr.h"

#ifdef PSCHED_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kBlock = uint64_t{64} << 20;
constexpr uint64_t kSmallBlock = uint64_t{1} << 20;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One pass over the file's `size` bytes by `threads` threads in blocks of `block` bytes: GB/s.
double read_pass(int fd, uint64_t size, unsigned threads, uint64_t block) {
  const uint64_t blocks = (size + block - 1) / block;
  std::atomic<uint64_t> next{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      std::vector<char> buffer(block);
      for (uint64_t b; (b = next.fetch_add(1)) < blocks;)
        if (::pread(fd, buffer.data(), block, off_t(b * block)) < 0) std::perror("pread");
    });
  for (auto& t : pool) t.join();
  return double(size) / seconds_since(t0) / 1e9;
}

int read_floor(const char* path, unsigned only_threads) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::perror(path);
    return 2;
  }
  const uint64_t size = uint64_t(st.st_size);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  double best = 0;
  unsigned best_threads = 1;
  uint64_t best_block = kBlock;
  std::vector<unsigned> counts{only_threads};
  if (only_threads == 0) {
    counts.clear();
    for (unsigned threads = 1; threads <= cores; threads *= 2) counts.push_back(threads);
  }
  for (const uint64_t block : {kBlock, kSmallBlock}) {
    if (block != kBlock && only_threads != 0) break;  // one pass: the cold one
    for (const unsigned threads : counts) {
      const double gbps = read_pass(fd, size, threads, block);
      std::printf("read_gbps_%u_threads%s=%.2f\n", threads, block == kBlock ? "" : "_1mib", gbps);
      if (gbps > best) best = gbps, best_threads = threads, best_block = block;
    }
  }
  std::printf("read_floor_gbps=%.2f\nread_floor_threads=%u\nread_floor_block_mib=%llu\n", best, best_threads,
              (unsigned long long)(best_block >> 20));
  ::close(fd);
  return 0;
}

int zarr_floor(const char* dir, unsigned threads) {
  auto meta = psched::read_zarray(dir);
  if (!meta) {
    std::fprintf(stderr, "%s\n", meta.message().c_str());
    return 2;
  }
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string()[0] != '.') files.push_back(e.path().string());
  uint64_t chunk_bytes = psched::element_bytes(meta->type.dtype);
  for (uint64_t c : meta->chunks) chunk_bytes *= c;
  uint64_t largest = 0;
  for (const std::string& f : files) largest = std::max<uint64_t>(largest, std::filesystem::file_size(f));
  // Two passes, the better counting: each thread's buffers are its own and touched before the
  // first (a fresh buffer's page faults made one pass 0.8 GB/s where the second ran 3.4 on this
  // VM), and the second pass finds the files in the page cache, as a worker does.
  struct ThreadBuffers {
    psched::ZarrDecoder decoder;
    std::string in;
    std::vector<char> out;
  };
  std::vector<ThreadBuffers> buffers(threads);
  for (ThreadBuffers& b : buffers) {
    b.in.assign(largest, '\0');
    b.out.assign(chunk_bytes, 0);
  }
  std::atomic<uint64_t> failed{0};
  double best = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::atomic<uint64_t> next{0};
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        psched::ZarrDecoder& decoder = buffers[t].decoder;
        std::string& in = buffers[t].in;
        std::vector<char>& out = buffers[t].out;
        for (uint64_t k; (k = next.fetch_add(1)) < files.size();) {
          const int fd = ::open(files[k].c_str(), O_RDONLY | O_CLOEXEC);
          struct stat st {};
          if (fd < 0 || ::fstat(fd, &st) != 0) {
            ++failed;
            continue;
          }
          in.resize(uint64_t(st.st_size));  // within its capacity: no new pages
          if (::pread(fd, in.data(), in.size(), 0) != ssize_t(in.size())) ++failed;
          ::close(fd);
          if (!decoder.decode(meta->compressor, in, out.data(), chunk_bytes)) ++failed;
        }
      });
    for (auto& t : pool) t.join();
    best = std::max(best, double(files.size() * chunk_bytes) / seconds_since(t0) / 1e9);
  }
  std::printf("zarr_chunks=%zu\nzarr_failed=%llu\nzarr_decode_gbps=%.2f\n", files.size(),
              (unsigned long long)failed.load(), best);
  return failed == 0 ? 0 : 1;
}

#ifdef PSCHED_HAVE_CUDA
int h2d_floor(int gpus) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "io-floor h2d: no CUDA device\n");
    return 2;
  }
  gpus = std::min(gpus <= 0 ? count : gpus, count);
  constexpr uint64_t kCopy = uint64_t{256} << 20;
  constexpr int kRepeats = 40;
  std::vector<double> gbps(size_t(gpus), 0);
  std::vector<std::thread> pool;
  std::atomic<bool> failed{false};
  for (int g = 0; g < gpus; ++g)
    pool.emplace_back([&, g] {
      void *host = nullptr, *device = nullptr;
      cudaStream_t stream = nullptr;
      if (cudaSetDevice(g) != cudaSuccess || cudaMallocHost(&host, kCopy) != cudaSuccess ||
          cudaMalloc(&device, kCopy) != cudaSuccess || cudaStreamCreate(&stream) != cudaSuccess) {
        failed = true;
        return;
      }
      std::memset(host, 1, kCopy);
      cudaMemcpyAsync(device, host, kCopy, cudaMemcpyHostToDevice, stream);  // warm up
      cudaStreamSynchronize(stream);
      const auto t0 = Clock::now();
      for (int r = 0; r < kRepeats; ++r) cudaMemcpyAsync(device, host, kCopy, cudaMemcpyHostToDevice, stream);
      if (cudaStreamSynchronize(stream) != cudaSuccess) failed = true;
      gbps[size_t(g)] = double(kCopy) * kRepeats / seconds_since(t0) / 1e9;
      cudaStreamDestroy(stream);
      cudaFree(device);
      cudaFreeHost(host);
    });
  for (auto& t : pool) t.join();
  double total = 0;
  for (int g = 0; g < gpus; ++g) {
    std::printf("h2d_gbps_gpu%d=%.2f\n", g, gbps[size_t(g)]);
    total += gbps[size_t(g)];
  }
  std::printf("h2d_gbps_all=%.2f\nh2d_gpus=%d\n", total, gpus);
  return failed ? 1 : 0;
}

// A file's pages sent to the GPUs with no host copy: the file mapped, each GPU's share registered
// with CUDA (cudaHostRegister, read-only: the page cache's pages pinned where they lie) a block at a
// time and copied from there; the register's cost apart from the copies'. Two passes: blocks
// registered and unregistered each time, then the whole share registered once and copied twice.
int h2d_mapped(const char* path, int gpus, uint64_t block) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "io-floor h2d-mapped: no CUDA device\n");
    return 2;
  }
  gpus = std::min(gpus <= 0 ? count : gpus, count);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    std::perror(path);
    return 2;
  }
  const uint64_t size = uint64_t(st.st_size) / 4096 * 4096;  // whole pages
  void* const map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    std::perror("mmap");
    return 2;
  }
  unsigned char* const base = static_cast<unsigned char*>(map);
  int read_only = 0;
  if (cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, 0) != cudaSuccess) read_only = -1;
  std::printf("host_register_read_only_supported=%d\n", read_only);  // -1: not told
  const size_t n_gpus = static_cast<size_t>(gpus);
  // Seconds per GPU: registering blocks, copying them; registering the whole share, copying it.
  std::vector<double> reg_s(n_gpus), copy_s(n_gpus), whole_reg_s(n_gpus), whole_copy_s(n_gpus);
  std::vector<uint64_t> bytes(n_gpus);
  std::atomic<int> errors{0};
  const auto ok = [&](cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    if (errors++ == 0) std::fprintf(stderr, "io-floor h2d-mapped: %s: %s\n", what, cudaGetErrorString(e));
    return false;
  };
  std::vector<std::thread> pool;
  for (int g = 0; g < gpus; ++g)
    pool.emplace_back([&, g] {
      const size_t i = size_t(g);
      const uint64_t lo = size / n_gpus * i / 4096 * 4096;
      const uint64_t hi = i + 1 == n_gpus ? size : size / n_gpus * (i + 1) / 4096 * 4096;
      bytes[i] = hi - lo;
      void* device = nullptr;
      cudaStream_t stream = nullptr;
      if (!ok(cudaSetDevice(g), "cudaSetDevice") || !ok(cudaMalloc(&device, block), "cudaMalloc") ||
          !ok(cudaStreamCreate(&stream), "cudaStreamCreate"))
        return;
      for (uint64_t at = lo; at < hi; at += block) {
        const uint64_t n = std::min(block, hi - at);
        auto t0 = Clock::now();
        if (!ok(cudaHostRegister(base + at, n, cudaHostRegisterReadOnly), "cudaHostRegister")) return;
        reg_s[i] += seconds_since(t0);
        t0 = Clock::now();
        ok(cudaMemcpyAsync(device, base + at, n, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        copy_s[i] += seconds_since(t0);
        ok(cudaHostUnregister(base + at), "cudaHostUnregister");
      }
      auto t0 = Clock::now();
      if (!ok(cudaHostRegister(base + lo, hi - lo, cudaHostRegisterReadOnly), "cudaHostRegister")) return;
      whole_reg_s[i] = seconds_since(t0);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass counts
        t0 = Clock::now();
        for (uint64_t at = lo; at < hi; at += block)
          ok(cudaMemcpyAsync(device, base + at, std::min(block, hi - at), cudaMemcpyHostToDevice, stream),
             "cudaMemcpyAsync");
        ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        whole_copy_s[i] = seconds_since(t0);
      }
      ok(cudaHostUnregister(base + lo), "cudaHostUnregister");
      ok(cudaStreamDestroy(stream), "cudaStreamDestroy");
      ok(cudaFree(device), "cudaFree");
    });
  for (auto& t : pool) t.join();
  double registered_all = 0, blocks_all = 0;
  for (size_t i = 0; i < n_gpus; ++i) {
    const double b = double(bytes[i]) / 1e9;
    std::printf("mapped_gpu%zu: register %.2f GB/s, copy %.2f GB/s, register+copy %.2f GB/s; whole share register "
                "%.2f GB/s, copy from it %.2f GB/s\n",
                i, b / reg_s[i], b / copy_s[i], b / (reg_s[i] + copy_s[i]), b / whole_reg_s[i], b / whole_copy_s[i]);
    registered_all += b / whole_copy_s[i];
    blocks_all += b / (reg_s[i] + copy_s[i]);
  }
  std::printf("mapped_h2d_registered_gbps_all=%.2f\nmapped_h2d_blocks_gbps_all=%.2f\n", registered_all, blocks_all);
  ::munmap(map, size);
  ::close(fd);
  return errors == 0 ? 0 : 1;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "read" && argc == 3) return read_floor(argv[2], 0);
  if (what == "read" && argc == 4) return read_floor(argv[2], unsigned(std::max(1, std::atoi(argv[3]))));
  if (what == "zarr" && argc == 4) return zarr_floor(argv[2], unsigned(std::max(1, std::atoi(argv[3]))));
#ifdef PSCHED_HAVE_CUDA
  if (what == "h2d") return h2d_floor(argc > 2 ? std::atoi(argv[2]) : 0);
  if (what == "h2d-mapped" && argc >= 3)
    return h2d_mapped(argv[2], argc > 3 ? std::atoi(argv[3]) : 0,
                      (argc > 4 ? uint64_t(std::atoll(argv[4])) : 64) << 20);
#endif
  std::fprintf(stderr,
               "usage: io-floor read FILE [THREADS] | zarr DIR THREADS | h2d [GPUS] | h2d-mapped FILE [GPUS [BLOCK_MIB]]\n");
  return 2;
}
