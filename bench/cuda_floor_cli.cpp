// cuda-floor's command line and report (cuda_floor.h).
#include "bench/cuda_floor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace psched::cuda_floor {
namespace {

// GPU.md, H100 (nvidia-h100-x1), 2026-11-22.
constexpr double kGpuMdFloorMs = 0.737;
constexpr double kGpuMdFusedMs = 0.238;

}  // namespace

void usage(const char* why) {
  std::fprintf(stderr,
               "cuda-floor: %s\nusage: cuda-floor [--device D] [--iterations N] "
               "[--chunk ROWSxCOLS] [--chunks N [--fused] [--streams S]] [--batch-chunk SIDE]\n",
               why);
  std::exit(2);
}

namespace {

uint64_t number(const char* flag, const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0') usage((std::string(flag) + " needs a number").c_str());
  return v;
}

}  // namespace

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((flag + " needs a value").c_str());
      return argv[++i];
    };
    if (flag == "--device") a.device = int(number("--device", value()));
    else if (flag == "--iterations")
      a.iterations = std::max(1, int(number("--iterations", value())));
    else if (flag == "--chunks") a.chunks = number("--chunks", value());
    else if (flag == "--streams") a.streams = int(number("--streams", value()));
    else if (flag == "--fused") a.fused = true;
    else if (flag == "--batch-chunk") a.batch_side = number("--batch-chunk", value());
    else if (flag == "--chunk") {
      const std::string v = value();
      const size_t x = v.find('x');
      if (x == std::string::npos) usage("--chunk takes ROWSxCOLS");
      a.chunk_rows = number("--chunk", v.substr(0, x).c_str());
      a.chunk_cols = number("--chunk", v.substr(x + 1).c_str());
    } else if (flag == "--help" || flag == "-h") {
      usage("the kernels' floor for one chunk of the DeepOps benchmark");
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return a;
}

JobSpec deepops_benchmark_job(const Args& a) {
  JobSpec s;  // the defaults are the DeepOps benchmark: normal(10, 1), (x + 1)[::2, ::2], 500000 x 500000
  s.chunk_rows = a.chunk_rows;
  s.chunk_cols = a.chunk_cols;
  const Status valid = validate(s);
  if (!valid) usage(valid.message().c_str());
  return normalized(s);
}

// The floor's key=value lines.
void print_floor(const char* device, const JobSpec& spec, const Args& args, const Floor& f) {
  std::printf("device=%s\n", device);
  std::printf("chunk=%llux%llu float64 normal(10,1) (x+1)[::2,::2]\n",
              (unsigned long long)spec.chunk_rows, (unsigned long long)spec.chunk_cols);
  std::printf("iterations=%d\n", args.iterations);
  std::printf("generate_ms=%.4f\n", f.generate_ms);
  std::printf("generate_reference_ms=%.4f\n", f.generate_reference_ms);
  std::printf("generate_uniform_ms=%.4f\n", f.generate_uniform_ms);
  std::printf("generate_arange_ms=%.4f\n", f.generate_arange_ms);
  std::printf("generate_arange_write_tb_per_s=%.3f\n",
              double(spec.chunk_bytes()) / (f.generate_arange_ms * 1e-3) / 1e12);
  std::printf("generate_cuda_libm_ms=%.4f\n", f.generate_cuda_libm_ms);
  std::printf("strided_reduce_ms=%.4f\n", f.reduce_ms);
  std::printf("strided_sum_only_ms=%.4f\n", f.sum_only_ms);
  std::printf("floor_ms_per_chunk=%.4f\n", f.floor_ms);
  std::printf("fused_ms_per_chunk=%.4f\n", f.fused_ms);
  std::printf("d2d_copy_tb_per_s=%.3f\n", f.copy_tb_per_s);
  std::printf("cub_sum_ms=%.4f\n", f.cub_sum_ms);
  std::printf("cub_sum_tb_per_s=%.3f\n", f.cub_sum_tb_per_s);
  std::printf("floor_mean=%.6f\n", f.mean);
  std::printf("floor_vs_gpu_md=%.3f\n", f.floor_ms / kGpuMdFloorMs);
  std::printf("fused_vs_gpu_md=%.3f\n", f.fused_ms / kGpuMdFusedMs);
}

// --batch-chunk's lines, beside the floor per 1e8 elements.
void print_batch(const JobSpec& spec, const Floor& f, const BatchFloor& b, uint64_t batch_side) {
  const double per_1e8 = f.floor_ms * 1e8 / double(spec.chunk_rows * spec.chunk_cols);
  std::printf("batch_chunk=%llu\n", (unsigned long long)batch_side);
  std::printf("batch_chunks=%u\n", b.chunks);
  std::printf("batch_generate_ms=%.4f\n", b.generate_ms);
  std::printf("batch_reduce_ms=%.4f\n", b.reduce_ms);
  std::printf("batch_ms_per_1e8=%.4f\n", b.ms_per_1e8);
  std::printf("batch_over_floor=%.3f\n", b.ms_per_1e8 / per_1e8);
  std::printf("batch_copy_results_ms=%.4f\n", b.copy_results_ms);
  std::printf("batch_copy_results_share=%.4f\n", b.copy_results_ms / b.total_ms);
  std::printf("batch_copy_full_ms=%.4f\n", b.copy_full_ms);
  std::printf("batch_copy_full_share=%.4f\n", b.copy_full_ms / b.total_ms);
}

// --chunks' lines: the real backend against its floor.
void print_backend(const Args& args, const Floor& f, const BackendRun& run) {
  const double floor = args.fused ? f.fused_ms : f.floor_ms;
  std::printf("backend_chunks=%llu\n", (unsigned long long)args.chunks);
  std::printf("backend_fused=%d\n", args.fused ? 1 : 0);
  std::printf("backend_streams=%d\n", args.streams);
  std::printf("backend_ms_per_chunk=%.4f\n", run.ms_per_chunk);
  std::printf("backend_busy_ms_per_chunk=%.4f\n", run.busy_ms_per_chunk);
  std::printf("backend_over_floor=%.3f\n", run.ms_per_chunk / floor);
  std::printf("backend_mean=%.6f\n", run.mean);
  std::printf("backend_failed=%llu\n", (unsigned long long)run.failed);
  if (run.failed > 0) std::printf("backend_first_error=%s\n", run.first_error.c_str());
}

void print_roofline(const Floor& f, const BackendRun* run) {
  const double write = f.generate_arange_ms;
  auto line = [&](const char* name, double ms) { std::printf("roofline_%s=%.3f\n", name, write / ms); };
  line("write_only", write);
  line("uniform", f.generate_uniform_ms);
  line("normal", f.generate_ms);
  line("two_kernel_chunk", f.floor_ms);
  line("fused", f.fused_ms);
  if (run != nullptr) line("backend", run->ms_per_chunk);
  std::printf("roofline: of the HBM write limit (%.3f ms a chunk): uniform %.2f, normal %.2f, "
              "generate + reduce %.2f, fused %.2f",
              write, write / f.generate_uniform_ms, write / f.generate_ms, write / f.floor_ms,
              write / f.fused_ms);
  if (run != nullptr) std::printf(", backend %.2f", write / run->ms_per_chunk);
  std::printf("\n");
}

void print_summary(const char* device, const Args& args, const Floor& f, const BackendRun* run) {
  std::printf("%s: floor %.3f ms/chunk (generate %.3f + reduce %.3f; GPU.md H100 %.3f, x%.2f), "
              "fused %.3f ms/chunk; 2500 chunks = %.2f s",
              device, f.floor_ms, f.generate_ms, f.reduce_ms, kGpuMdFloorMs,
              f.floor_ms / kGpuMdFloorMs, f.fused_ms, 2500 * f.floor_ms / 1e3);
  if (run != nullptr)
    std::printf("; backend %.3f ms/chunk = x%.2f of its floor", run->ms_per_chunk,
                run->ms_per_chunk / (args.fused ? f.fused_ms : f.floor_ms));
  std::printf("\n");
}

}  // namespace psched::cuda_floor
