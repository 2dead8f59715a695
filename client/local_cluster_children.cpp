// The processes of a local cluster (local_cluster_children.h).
#include "client/local_cluster_children.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/reader_share.h"

namespace pclient {

namespace {

std::vector<std::string> tls_args_of(const psched::TlsFiles& tls) {
  if (!tls.any()) return {};
  return {"--tls-ca-file", tls.ca_file, "--tls-cert", tls.cert_file, "--tls-key", tls.key_file};
}

// The GPUs visible to us (CUDA_VISIBLE_DEVICES, which may already narrow them), as its entries.
std::vector<std::string> visible_gpus() {
  std::vector<std::string> visible;
  if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES"); env && *env) {
    std::string list = env;
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      visible.push_back(list.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  return visible;
}

// Worker i of n: a CPU worker with its share of the cores, or GPU i of those visible (-g N: GPUs
// 0..N-1) with its share of the readers and of the pages it may register (core/reader_share.h).
LocalChild worker_child(const LocalClusterOptions& o, const std::vector<std::string>& shared,
                        const std::vector<std::string>& visible, int i, int n) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const int threads = o.threads_per_worker > 0 ? o.threads_per_worker : std::max(1, int(cores) / std::max(1, n));
  LocalChild w{"pcuda-worker", shared, {}};
  w.args.insert(w.args.end(), {"--name", fmt::format("local-{}", i)});
  if (o.gpu_workers > 0) {
    const unsigned readers = psched::readers_per_gpu(unsigned(n));
    w.args.insert(w.args.end(), {"--backend", "cuda", "--readers", std::to_string(readers), "--register-limit",
                                 std::to_string(psched::register_limit_per_gpu(unsigned(n)))});
    w.env["CUDA_VISIBLE_DEVICES"] = size_t(i) < visible.size() ? visible[size_t(i)] : std::to_string(i);
  } else {
    w.args.insert(w.args.end(), {"--backend", "cpu", "--nthreads", std::to_string(threads)});
  }
  return w;
}

}  // namespace

std::vector<LocalChild> local_cluster_children(const LocalClusterOptions& o, const std::string& scheduler_file) {
  LocalChild sched{"psched",
                   {"--host", "127.0.0.1", "--port", "0", "--dashboard-address", o.dashboard_address,
                    "--scheduler-file", scheduler_file, "--log-level", o.log_level},
                   {}};
  // What every worker is started with (its name, backend and device follow), and what psched and
  // the workers both are.
  std::vector<std::string> shared = {"--scheduler-file", scheduler_file, "--log-level", o.log_level,
                                     "--death-timeout", "10"};
  if (!o.memory_limit.empty()) shared.insert(shared.end(), {"--memory-limit", o.memory_limit});
  std::vector<std::string> both = tls_args_of(o.tls);
  if (!o.token_file.empty()) both.insert(both.end(), {"--token-file", o.token_file});
  if (o.spin_us >= 0) both.insert(both.end(), {"--spin-us", std::to_string(o.spin_us)});
  sched.args.insert(sched.args.end(), both.begin(), both.end());
  shared.insert(shared.end(), both.begin(), both.end());

  std::vector<LocalChild> children{std::move(sched)};
  const std::vector<std::string> visible = o.gpu_workers > 0 ? visible_gpus() : std::vector<std::string>{};
  const int n = o.gpu_workers > 0 ? o.gpu_workers : o.cpu_workers;
  for (int i = 0; i < n; ++i) children.push_back(worker_child(o, shared, visible, i, n));
  return children;
}

}  // namespace pclient
