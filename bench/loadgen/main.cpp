// psched-loadgen: a simulated GPU fleet and a crowd of clients against a real psched, over the real
// protocol, in one process on one Asio loop. It registers N simulated workers, optionally holds
// them idle (heartbeat cost), then lets M clients submit jobs and checks every result bit for bit
// against the closed form, while optionally killing a random simulated worker every --churn-ms.
// It prints one "key: value" line per figure (bench/scale.sh and tests/bench read them) and exits
// 1 when any result differs from the reference, or any job failed without --allow-failures.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

#include "bench/loadgen/proc_stats.h"
#include "bench/loadgen/sim_client.h"
#include "bench/loadgen/sim_worker.h"
#include "common/address.h"
#include "common/closed_form.h"
#include "common/logging.h"

namespace asio = boost::asio;
using namespace psched;
using namespace psched::loadgen;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
  std::string scheduler;
  pid_t scheduler_pid = 0;
  uint32_t workers = 64;
  double element_ps = 6.7;  // 0.67 ms per 10000 x 10000 chunk (the H100, bench/README.md)
  uint32_t slots = 8;
  uint64_t window_elements = 0;
  int64_t corrupt_chunk = -1;
  uint32_t result_batch = 1;
  double idle_s = 0;
  uint32_t clients = 0, jobs = 1, outstanding = 1;
  double duration_s = 0;
  uint32_t churn_ms = 0;
  bool allow_failures = false;
  double ready_timeout_s = 120;
  JobSpec job;
  std::string generator = "constant";
  bool vary = true;
};

// Figures for scripts, printed at the end as "figure NAME VALUE" (bench/scale.sh reads them).
std::vector<std::pair<std::string, std::string>> g_figures;
template <typename T>
void figure(const std::string& name, const T& value) {
  g_figures.emplace_back(name, fmt::format("{}", value));
}

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs the loop until done() or the timeout; false on timeout.
bool run_until(asio::io_context& io, const std::function<bool()>& done, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    io.run_one_for(std::chrono::milliseconds(10));
  }
  return true;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, size_t(std::ceil(p * double(v.size()))) - (p > 0 ? 1 : 0));
  return v[i];
}

void print_cost(const char* who, const char* phase, const ProcSample& a, const ProcSample& b, double wall_s) {
  if (!a.ok || !b.ok) return;
  const double cpu = b.cpu_seconds - a.cpu_seconds, wait = b.wait_seconds - a.wait_seconds;
  fmt::print("{}_cpu_s[{}]: {:.3f} ({:.0f}% of one core); waited for a CPU {:.3f} s\n", who, phase, cpu,
             100.0 * cpu / std::max(wall_s, 1e-9), wait);
  figure(fmt::format("{}_cpu_s.{}", who, phase), fmt::format("{:.3f}", cpu));
  figure(fmt::format("{}_wait_s.{}", who, phase), fmt::format("{:.3f}", wait));
  if (std::string(who) == "psched")
    fmt::print("psched_rss_kb[{}]: {} -> {} (peak {})\n", phase, a.rss_kb, b.rss_kb, b.hwm_kb);
}

int run(const Options& o) {
  // psched's figures from /proc, when its pid was given (sample_process(0) would read our own).
  auto sample_process = [&](pid_t pid) { return pid > 0 ? loadgen::sample_process(pid) : ProcSample{}; };
  auto address = parse_address(o.scheduler);
  if (!address) {
    fmt::print(stderr, "psched-loadgen: {}\n", address.message());
    return 2;
  }
  asio::io_context io;
  boost::system::error_code ec;
  auto endpoints = asio::ip::tcp::resolver(io).resolve(address->host, std::to_string(address->port), ec);
  if (ec || endpoints.empty()) {
    fmt::print(stderr, "psched-loadgen: cannot resolve {}: {}\n", o.scheduler, ec.message());
    return 2;
  }
  const asio::ip::tcp::endpoint endpoint = endpoints.begin()->endpoint();

  DeviceModel device;
  device.seconds_per_element = o.element_ps * 1e-12;
  device.slots = o.slots;
  device.window_elements = o.window_elements;
  device.corrupt_chunk = o.corrupt_chunk;
  device.result_batch = std::max<uint32_t>(1, o.result_batch);
  Fleet fleet(io, endpoint, device, "sim");

  // 1. Register the fleet.
  const ProcSample before_fleet = sample_process(o.scheduler_pid);
  const auto t0 = Clock::now();
  fleet.start(o.workers);
  if (!run_until(io, [&] { return fleet.counters().connected_now >= o.workers; }, o.ready_timeout_s)) {
    fmt::print(stderr, "psched-loadgen: only {} of {} workers registered within {} s\n",
               fleet.counters().connected_now, o.workers, o.ready_timeout_s);
    return 2;
  }
  fmt::print("ready: {} workers registered in {:.3f} s\n", o.workers, seconds_since(t0));
  std::fflush(stdout);
  const ProcSample after_fleet = sample_process(o.scheduler_pid);
  if (before_fleet.ok && after_fleet.ok && o.workers > 0) {
    const double per_worker =
        1024.0 * double(int64_t(after_fleet.rss_kb) - int64_t(before_fleet.rss_kb)) / o.workers;
    fmt::print("psched_bytes_per_worker: {:.0f} (RSS {} -> {} kB for {} workers)\n", per_worker,
               before_fleet.rss_kb, after_fleet.rss_kb, o.workers);
    figure("psched_bytes_per_worker", fmt::format("{:.0f}", per_worker));
  }

  // 2. Idle: what heartbeats cost the scheduler.
  if (o.idle_s > 0) {
    const ProcSample a = sample_process(o.scheduler_pid), self_a = loadgen::sample_process(getpid());
    const auto ti = Clock::now();
    run_until(io, [] { return false; }, o.idle_s);
    const double wall = seconds_since(ti);
    const ProcSample b = sample_process(o.scheduler_pid), self_b = loadgen::sample_process(getpid());
    print_cost("psched", "idle", a, b, wall);
    print_cost("loadgen", "idle", self_a, self_b, wall);
    if (a.ok && b.ok && o.workers > 0) {
      const double us = 1e6 * (b.cpu_seconds - a.cpu_seconds) / wall / o.workers;
      fmt::print("psched_heartbeat_us_per_worker_s: {:.2f} (CPU per worker per second, idle)\n", us);
      figure("psched_heartbeat_us_per_worker_s", fmt::format("{:.2f}", us));
    }
  }

  // 3. Clients.
  int status = 0;
  if (o.clients > 0) {
    ClientPlan plan;
    plan.base = o.job;
    plan.vary = o.vary;
    plan.jobs_per_client = o.jobs;
    plan.outstanding = o.outstanding;
    if (o.duration_s > 0)
      plan.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
    ClientPool pool(io, endpoint, plan);
    const ProcSample a = sample_process(o.scheduler_pid), self_a = loadgen::sample_process(getpid());
    const double busy_a = fleet.counters().busy_seconds;
    const auto tc = Clock::now();
    asio::steady_timer churn(io);
    std::function<void()> churn_next = [&] {
      churn.expires_after(std::chrono::milliseconds(o.churn_ms));
      churn.async_wait([&](const boost::system::error_code& e) {
        if (e || pool.finished()) return;
        fleet.churn_one();
        churn_next();
      });
    };
    if (o.churn_ms > 0) churn_next();
    pool.start(o.clients);
    const double limit = o.duration_s > 0 ? o.duration_s + 300 : 3600;
    if (!run_until(io, [&] { return pool.finished(); }, limit)) {
      fmt::print("error: clients did not finish within {} s\n", limit);
      status = 1;
    }
    churn.cancel();
    const double wall = seconds_since(tc);
    const ProcSample b = sample_process(o.scheduler_pid), self_b = loadgen::sample_process(getpid());
    const ClientStats& st = pool.stats();
    const double busy = fleet.counters().busy_seconds - busy_a;
    const double span = st.ok + st.mismatched > 0
                            ? std::chrono::duration<double>(st.last_result - st.first_submit).count()
                            : wall;
    fmt::print("jobs: {} submitted, {} exact, {} failed, {} mismatched\n", st.submitted, st.ok,
               st.failed, st.mismatched);
    for (const auto& [message, n] : st.failure_counts) fmt::print("failure: {} x {}\n", n, message);
    for (const auto& m : st.mismatches) fmt::print("mismatch: {}\n", m);
    const double p50 = 1e3 * percentile(st.latency_s, 0.5), p99 = 1e3 * percentile(st.latency_s, 0.99);
    fmt::print("latency_ms: p50 {:.3f} p99 {:.3f} max {:.3f}\n", p50, p99, 1e3 * percentile(st.latency_s, 1.0));
    const double ideal = o.workers ? busy / o.workers : 0;
    const double efficiency = span > 0 ? 100.0 * ideal / span : 0.0;
    fmt::print("wall_s: {:.4f} (first submit to last result)\n", span);
    fmt::print("simulated_gpu_s: {:.4f}; ideal_s: {:.4f} (GPU time / {} workers); efficiency: {:.1f}%\n",
               busy, ideal, o.workers, efficiency);
    fmt::print("chunks: {} done, {} refused; worker kills: {}, disconnects: {}\n",
               fleet.counters().chunks_done, fleet.counters().chunks_refused, fleet.counters().kills,
               fleet.counters().disconnects);
    print_cost("psched", "clients", a, b, wall);
    print_cost("loadgen", "clients", self_a, self_b, wall);
    figure("exact", st.ok);
    figure("failed", st.failed);
    figure("mismatched", st.mismatched);
    figure("p50_ms", fmt::format("{:.2f}", p50));
    figure("p99_ms", fmt::format("{:.2f}", p99));
    figure("wall_s", fmt::format("{:.4f}", span));
    figure("ideal_s", fmt::format("{:.4f}", ideal));
    figure("efficiency_pct", fmt::format("{:.1f}", efficiency));
    if (st.mismatched > 0 || (st.failed > 0 && !o.allow_failures) || st.ok == 0) status = 1;
    pool.stop();
  }

  fleet.stop();
  // Let the Goodbyes go out; nothing waits on them.
  run_until(io, [] { return false; }, 0.2);
  const ProcSample end = sample_process(o.scheduler_pid);
  if (end.ok) {
    fmt::print("psched_peak_rss_kb: {}\n", end.hwm_kb);
    figure("psched_peak_rss_kb", end.hwm_kb);
  }
  for (const auto& [name, value] : g_figures) fmt::print("figure {} {}\n", name, value);
  fmt::print("result: {}\n", status == 0 ? "ok" : "FAILED");
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"psched-loadgen: simulated GPU workers and clients against a real psched"};
  app.add_option("--scheduler", o.scheduler, "scheduler address (tcp://host:port)")->required();
  app.add_option("--scheduler-pid", o.scheduler_pid, "psched's pid: report its CPU and memory from /proc");
  app.add_option("-w,--workers", o.workers, "simulated GPU workers")->capture_default_str();
  app.add_option("--element-ps", o.element_ps, "simulated device time per array element, picoseconds")
      ->capture_default_str();
  app.add_option("--slots", o.slots, "chunks in flight per worker (Hello slots)")->capture_default_str();
  app.add_option("--window-elements", o.window_elements, "Hello windowElements (0 as the CUDA backend)");
  app.add_option("--result-batch", o.result_batch,
                 "report results once this many chunks are done (or the queue ran dry); 1: each at once")
      ->capture_default_str();
  app.add_option("--test-corrupt-chunk", o.corrupt_chunk,
                 "test only: workers answer this chunk of every job with a wrong sum (the check must fail)");
  app.add_option("--idle", o.idle_s, "hold the fleet idle this long first (seconds): heartbeat cost");
  app.add_option("-c,--clients", o.clients, "client connections")->capture_default_str();
  app.add_option("-j,--jobs", o.jobs, "jobs per client, submitted at once")->capture_default_str();
  app.add_option("--duration", o.duration_s, "instead: keep submitting for this long (seconds)");
  app.add_option("--outstanding", o.outstanding, "with --duration: jobs in flight per client");
  app.add_option("--churn-ms", o.churn_ms, "kill a random simulated worker this often and start another");
  app.add_flag("--allow-failures", o.allow_failures, "failed jobs (each with its message) do not fail the run");
  app.add_option("--ready-timeout", o.ready_timeout_s, "seconds to wait for the fleet to register");
  app.add_option("--generator", o.generator, "arange or constant")->check(CLI::IsMember({"arange", "constant"}));
  app.add_option("-x,--rows", o.job.rows)->capture_default_str();
  app.add_option("-y,--cols", o.job.cols)->capture_default_str();
  app.add_option("--chunk-x", o.job.chunk_rows)->capture_default_str();
  app.add_option("--chunk-y", o.job.chunk_cols)->capture_default_str();
  app.add_flag("!--same-jobs", o.vary, "every job the same (default: start, step and selection vary)");
  o.job.rows = o.job.cols = 1000;
  o.job.chunk_rows = o.job.chunk_cols = 100;
  CLI11_PARSE(app, argc, argv);
  o.job.generator = o.generator == "arange" ? Generator::kArange : Generator::kConstant;
  o.job.param0 = 1;
  o.job.param1 = 1;
  if (Status st = validate(o.job); !st) {
    fmt::print(stderr, "psched-loadgen: {}\n", st.message());
    return 2;
  }
  if (!expected_result(o.job).sum_exact) {
    fmt::print(stderr, "psched-loadgen: the job's sum is not exact in float64 (values or sum past 2^53): "
                       "results could not be checked bit for bit\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  return run(o);
}
