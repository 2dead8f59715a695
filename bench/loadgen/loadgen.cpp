#include "bench/loadgen/loadgen.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <utility>
#include <vector>

#include "app/exit_codes.h"
#include "bench/loadgen/proc_stats.h"
#include "bench/loadgen/sim_client.h"
#include "bench/loadgen/sim_worker.h"
#include "net/address.h"

namespace psched::loadgen {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Figures for scripts, printed at the end as "figure NAME VALUE" (bench/scale.sh reads them).
struct Figures {
  std::vector<std::pair<std::string, std::string>> lines;
  template <typename T>
  void add(const std::string& name, const T& value) {
    lines.emplace_back(name, fmt::format("{}", value));
  }
};

// psched's figures from /proc, when its pid was given (pid 0 would read our own).
ProcSample sample_scheduler(pid_t pid) { return pid > 0 ? sample_process(pid) : ProcSample{}; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Runs the loop until done() or the timeout; false on timeout. What is ready runs without a clock
// read per handler (run_one_for reads it twice: 13% of the loadgen's CPU on 1024 workers); the
// clock is read only before waiting.
bool run_until(asio::io_context& io, const std::function<bool()>& done, double timeout_s) {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  while (!done()) {
    for (int n = 0; n < 1024 && io.poll_one() > 0; ++n)
      if (done()) return true;
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

void print_cost(Figures& figures, const char* who, const char* phase, const ProcSample& a, const ProcSample& b, double wall_s) {
  if (!a.ok || !b.ok) return;
  const double cpu = b.cpu_seconds - a.cpu_seconds, wait = b.wait_seconds - a.wait_seconds;
  fmt::print("{}_cpu_s[{}]: {:.3f} ({:.0f}% of one core); waited for a CPU {:.3f} s\n", who, phase, cpu,
             100.0 * cpu / std::max(wall_s, 1e-9), wait);
  figures.add(fmt::format("{}_cpu_s.{}", who, phase), fmt::format("{:.3f}", cpu));
  figures.add(fmt::format("{}_wait_s.{}", who, phase), fmt::format("{:.3f}", wait));
  if (std::string(who) == "psched")
    fmt::print("psched_rss_kb[{}]: {} -> {} (peak {})\n", phase, a.rss_kb, b.rss_kb, b.hwm_kb);
}

// Opens the fleet and waits until every worker is registered; psched's memory per worker.
bool register_fleet(asio::io_context& io, Fleet& fleet, const LoadgenOptions& o, Figures& figures) {
  const ProcSample before_fleet = sample_scheduler(o.scheduler_pid);
  const auto t0 = Clock::now();
  fleet.start(o.workers);
  if (!run_until(io, [&] { return fleet.counters().connected_now >= o.workers; }, o.ready_timeout_s)) {
    fmt::print(stderr, "psched-loadgen: only {} of {} workers registered within {} s\n",
               fleet.counters().connected_now, o.workers, o.ready_timeout_s);
    return false;
  }
  fmt::print("ready: {} workers registered in {:.3f} s\n", o.workers, seconds_since(t0));
  std::fflush(stdout);
  const ProcSample after_fleet = sample_scheduler(o.scheduler_pid);
  if (before_fleet.ok && after_fleet.ok && o.workers > 0) {
    const double per_worker =
        1024.0 * double(int64_t(after_fleet.rss_kb) - int64_t(before_fleet.rss_kb)) / o.workers;
    fmt::print("psched_bytes_per_worker: {:.0f} (RSS {} -> {} kB for {} workers)\n", per_worker,
               before_fleet.rss_kb, after_fleet.rss_kb, o.workers);
    figures.add("psched_bytes_per_worker", fmt::format("{:.0f}", per_worker));
  }
  return true;
}

// What heartbeats cost the scheduler while nothing else happens.
void watch_idle(asio::io_context& io, const LoadgenOptions& o, Figures& figures) {
  const ProcSample a = sample_scheduler(o.scheduler_pid), self_a = sample_process(getpid());
  const auto ti = Clock::now();
  run_until(io, [] { return false; }, o.idle_s);
  const double wall = seconds_since(ti);
  const ProcSample b = sample_scheduler(o.scheduler_pid), self_b = sample_process(getpid());
  print_cost(figures, "psched", "idle", a, b, wall);
  print_cost(figures, "loadgen", "idle", self_a, self_b, wall);
  if (a.ok && b.ok && o.workers > 0) {
    const double us = 1e6 * (b.cpu_seconds - a.cpu_seconds) / wall / o.workers;
    fmt::print("psched_heartbeat_us_per_worker_s: {:.2f} (CPU per worker per second, idle)\n", us);
    figures.add("psched_heartbeat_us_per_worker_s", fmt::format("{:.2f}", us));
  }
}

// The clients' jobs, every result checked; the fleet's throughput against its ideal.
int run_clients(asio::io_context& io, Fleet& fleet, const asio::ip::tcp::endpoint& endpoint,
                const LoadgenOptions& o, Figures& figures) {
  int status = 0;
  ClientPlan plan;
  plan.base = o.job;
  plan.vary = o.vary;
  plan.jobs_per_client = o.jobs;
  plan.outstanding = o.outstanding;
  if (o.duration_s > 0)
    plan.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  ClientPool pool(io, endpoint, plan);
  const ProcSample a = sample_scheduler(o.scheduler_pid), self_a = sample_process(getpid());
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
    status = kExitFailure;
  }
  churn.cancel();
  const double wall = seconds_since(tc);
  const ProcSample b = sample_scheduler(o.scheduler_pid), self_b = sample_process(getpid());
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
  print_cost(figures, "psched", "clients", a, b, wall);
  print_cost(figures, "loadgen", "clients", self_a, self_b, wall);
  figures.add("exact", st.ok);
  figures.add("failed", st.failed);
  figures.add("mismatched", st.mismatched);
  figures.add("p50_ms", fmt::format("{:.2f}", p50));
  figures.add("p99_ms", fmt::format("{:.2f}", p99));
  figures.add("wall_s", fmt::format("{:.4f}", span));
  figures.add("ideal_s", fmt::format("{:.4f}", ideal));
  figures.add("efficiency_pct", fmt::format("{:.1f}", efficiency));
  if (st.mismatched > 0 || (st.failed > 0 && !o.allow_failures) || st.ok == 0) status = kExitFailure;
  pool.stop();
  return status;
}

}  // namespace

int run_loadgen(const LoadgenOptions& o) {
  auto address = parse_address(o.scheduler);
  if (!address) return exit_on("psched-loadgen", address.status());
  asio::io_context io;
  boost::system::error_code ec;
  auto endpoints = asio::ip::tcp::resolver(io).resolve(address->host, std::to_string(address->port), ec);
  if (ec || endpoints.empty()) {
    fmt::print(stderr, "psched-loadgen: cannot resolve {}: {}\n", o.scheduler, ec.message());
    return kExitUsage;
  }
  const asio::ip::tcp::endpoint endpoint = endpoints.begin()->endpoint();

  DeviceModel device;
  device.seconds_per_element = o.element_ps * 1e-12;
  device.slots = o.slots;
  device.window_elements = o.window_elements;
  device.corrupt_chunk = o.corrupt_chunk;
  device.crash_chunk = o.crash_chunk;
  device.result_batch = o.result_batch;
  Fleet fleet(io, endpoint, device, "sim");

  Figures figures;
  if (!register_fleet(io, fleet, o, figures)) return kExitUsage;
  if (o.idle_s > 0) watch_idle(io, o, figures);
  const int status = o.clients > 0 ? run_clients(io, fleet, endpoint, o, figures) : 0;
  fleet.stop();
  // Let the Goodbyes go out; nothing waits on them.
  run_until(io, [] { return false; }, 0.2);
  const ProcSample end = sample_scheduler(o.scheduler_pid);
  if (end.ok) {
    fmt::print("psched_peak_rss_kb: {}\n", end.hwm_kb);
    figures.add("psched_peak_rss_kb", end.hwm_kb);
  }
  for (const auto& [name, value] : figures.lines) fmt::print("figure {} {}\n", name, value);
  fmt::print("result: {}\n", status == 0 ? "ok" : "FAILED");
  return status;
}

}  // namespace psched::loadgen
