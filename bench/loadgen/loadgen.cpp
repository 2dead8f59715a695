#include "bench/loadgen/loadgen.h"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <thread>
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

// One loop's part of the load: its own io_context, simulated workers and clients. Shard 0 runs on
// the main thread (which also waits and measures), the others on threads of their own; with one
// thread the loadgen is the single loop it always was.
struct Shard {
  Shard(const asio::ip::tcp::endpoint& scheduler, const DeviceModel& device, uint32_t index, uint32_t shards)
      : work(asio::make_work_guard(io)), fleet(io, scheduler, device, "sim", index, shards) {}
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work;
  Fleet fleet;
  std::unique_ptr<ClientPool> pool;
  ClientStats stats;  // the pool's, copied on its loop once the clients are done
  std::thread thread;
};

class Shards {
 public:
  Shards(unsigned n, const asio::ip::tcp::endpoint& scheduler, const DeviceModel& device) {
    for (unsigned i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>(scheduler, device, i, n));
    for (size_t i = 1; i < shards_.size(); ++i) {
      Shard& s = *shards_[i];
      s.thread = std::thread([&s] { s.io.run(); });
    }
  }
  ~Shards() {
    for (size_t i = 1; i < shards_.size(); ++i) {
      shards_[i]->io.stop();
      shards_[i]->thread.join();
    }
  }
  size_t size() const { return shards_.size(); }
  asio::io_context& main_io() { return shards_[0]->io; }
  // Shard i's part of `total` (workers, clients): as even as it divides.
  static uint32_t part(uint32_t total, size_t i, size_t n) { return uint32_t(total / n + (i < total % n ? 1 : 0)); }
  // Runs f on each shard's own loop (shard 0's when the main thread runs it next).
  void on_each(const std::function<void(Shard&, size_t)>& f) {
    for (size_t i = 0; i < shards_.size(); ++i) asio::post(shards_[i]->io, [f, s = shards_[i].get(), i] { f(*s, i); });
  }
  Shard& operator[](size_t i) { return *shards_[i]; }
  // A counter summed over the fleets.
  template <typename T>
  T sum(std::atomic<T> FleetCounters::*counter) const {
    T total = 0;
    for (const auto& s : shards_) total += (s->fleet.counters().*counter).load();
    return total;
  }

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
};

// Every shard's client figures, merged.
ClientStats merged(Shards& shards) {
  ClientStats all;
  for (size_t i = 0; i < shards.size(); ++i) {
    const ClientStats& st = shards[i].stats;
    all.submitted += st.submitted;
    all.ok += st.ok;
    all.failed += st.failed;
    all.mismatched += st.mismatched;
    all.latency_s.insert(all.latency_s.end(), st.latency_s.begin(), st.latency_s.end());
    for (const auto& [message, n] : st.failure_counts) all.failure_counts[message] += n;
    all.mismatches.insert(all.mismatches.end(), st.mismatches.begin(), st.mismatches.end());
    if (st.submitted > 0 && (all.first_submit == Clock::time_point{} || st.first_submit < all.first_submit))
      all.first_submit = st.first_submit;
    all.last_result = std::max(all.last_result, st.last_result);
  }
  return all;
}

// Opens the fleet and waits until every worker is registered; psched's memory per worker.
bool register_fleet(Shards& shards, const LoadgenOptions& o, Figures& figures) {
  const ProcSample before_fleet = sample_scheduler(o.scheduler_pid);
  const auto t0 = Clock::now();
  const size_t n = shards.size();
  shards.on_each([&o, n](Shard& s, size_t i) { s.fleet.start(Shards::part(o.workers, i, n)); });
  auto connected = [&] { return shards.sum(&FleetCounters::connected_now); };
  auto refused = [&] { return shards.sum(&FleetCounters::refused); };
  // A refusal at Hello (another protocol version, a wrong token) will not pass by waiting.
  const bool ready = run_until(shards.main_io(), [&] { return connected() >= o.workers || refused() > 0; },
                               o.ready_timeout_s);
  if (refused() > 0) {
    fmt::print(stderr, "psched-loadgen: psched refused {} simulated workers at Hello (its message is logged above)\n",
               refused());
    return false;
  }
  if (!ready) {
    fmt::print(stderr, "psched-loadgen: only {} of {} workers registered within {} s\n", connected(), o.workers,
               o.ready_timeout_s);
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
void watch_idle(asio::io_context& io, const LoadgenOptions& o, Figures& figures) {  // shard 0's loop
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

// Where the efficiency went: the devices' mean idle time before their first work, in gaps (their
// queue dry) and after their last work, up to the last result, in the clients' span.
void print_idle(const ClientStats& st, const Shards& shards, Figures& figures) {
  const uint64_t started = shards.sum(&FleetCounters::started);
  if (started == 0 || st.ok + st.mismatched == 0) return;
  if (const uint64_t busy = shards.sum(&FleetCounters::busy_now); busy > 0) {  // their last work has not ended
    fmt::print("device_idle_ms: not judged: {} workers still hold work\n", busy);
    return;
  }
  auto seconds = [](Clock::time_point t) { return std::chrono::duration<double>(t.time_since_epoch()).count(); };
  const double n = double(started);
  const double lead = shards.sum(&FleetCounters::first_start_sum) / n - seconds(st.first_submit);
  const double gaps = shards.sum(&FleetCounters::gap_seconds) / n;
  const double tail = seconds(st.last_result) - shards.sum(&FleetCounters::last_end_sum) / n;
  fmt::print("device_idle_ms: before the first work {:.2f}, in gaps {:.2f}, after the last {:.2f} "
             "(means over the {} workers that got work)\n", 1e3 * lead, 1e3 * gaps, 1e3 * tail, started);
  figures.add("idle_lead_ms", fmt::format("{:.2f}", 1e3 * lead));
  figures.add("idle_gap_ms", fmt::format("{:.2f}", 1e3 * gaps));
  figures.add("idle_tail_ms", fmt::format("{:.2f}", 1e3 * tail));
}

// What the clients saw, as lines for a person and figures for scripts; the run's exit status.
int report_clients(const ClientStats& st, double busy, double wall, const Shards& shards, const LoadgenOptions& o,
                   Figures& figures) {
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
  print_idle(st, shards, figures);
  fmt::print("chunks: {} done, {} refused; worker kills: {}, disconnects: {}\n",
             shards.sum(&FleetCounters::chunks_done), shards.sum(&FleetCounters::chunks_refused),
             shards.sum(&FleetCounters::kills), shards.sum(&FleetCounters::disconnects));
  figures.add("exact", st.ok);
  figures.add("failed", st.failed);
  figures.add("mismatched", st.mismatched);
  figures.add("p50_ms", fmt::format("{:.2f}", p50));
  figures.add("p99_ms", fmt::format("{:.2f}", p99));
  figures.add("wall_s", fmt::format("{:.4f}", span));
  figures.add("ideal_s", fmt::format("{:.4f}", ideal));
  figures.add("efficiency_pct", fmt::format("{:.1f}", efficiency));
  return st.mismatched > 0 || (st.failed > 0 && !o.allow_failures) || st.ok == 0 ? kExitFailure : 0;
}

// The clients' jobs, every result checked; the fleet's throughput against its ideal.
int run_clients(Shards& shards, const asio::ip::tcp::endpoint& endpoint, const LoadgenOptions& o, Figures& figures) {
  ClientPlan plan;
  plan.base = o.job;
  plan.vary = o.vary;
  plan.jobs_per_client = o.jobs;
  plan.outstanding = o.outstanding;
  plan.verify = o.verify;
  if (o.duration_s > 0)
    plan.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  const size_t n = shards.size();
  for (size_t i = 0; i < n; ++i) shards[i].pool = std::make_unique<ClientPool>(shards[i].io, endpoint, plan);
  auto finished = [&] {
    size_t done = 0;
    for (size_t i = 0; i < n; ++i) done += shards[i].pool->finished_clients();
    return done >= o.clients;
  };
  const ProcSample a = sample_scheduler(o.scheduler_pid), self_a = sample_process(getpid());
  const double busy_a = shards.sum(&FleetCounters::busy_seconds);
  const auto tc = Clock::now();
  asio::steady_timer churn(shards.main_io());
  std::mt19937 random(54321);
  std::function<void()> churn_next = [&] {
    churn.expires_after(std::chrono::milliseconds(o.churn_ms));
    churn.async_wait([&](const boost::system::error_code& e) {
      if (e || finished()) return;
      Shard& victim = shards[std::uniform_int_distribution<size_t>(0, n - 1)(random)];
      asio::post(victim.io, [&victim] { victim.fleet.churn_one(); });
      churn_next();
    });
  };
  if (o.churn_ms > 0) churn_next();
  shards.on_each([&o, n](Shard& s, size_t i) { s.pool->start(Shards::part(o.clients, i, n)); });
  const double limit = o.duration_s > 0 ? o.duration_s + 300 : 3600;
  int status = 0;
  if (!run_until(shards.main_io(), finished, limit)) {
    fmt::print("error: clients did not finish within {} s\n", limit);
    status = kExitFailure;
  }
  churn.cancel();
  const double wall = seconds_since(tc);
  const ProcSample b = sample_scheduler(o.scheduler_pid), self_b = sample_process(getpid());
  const double busy = shards.sum(&FleetCounters::busy_seconds) - busy_a;
  // Each pool's figures are copied on its own loop, then merged here. The count is shared: a loop
  // still busy when the wait gives up must not count into a variable that is gone.
  auto copied = std::make_shared<std::atomic<size_t>>(0);
  shards.on_each([copied](Shard& s, size_t) {
    s.stats = s.pool->stats();
    s.pool->stop();
    ++*copied;
  });
  run_until(shards.main_io(), [&] { return *copied == n; }, 60);
  status = std::max(status, report_clients(merged(shards), busy, wall, shards, o, figures));
  print_cost(figures, "psched", "clients", a, b, wall);
  print_cost(figures, "loadgen", "clients", self_a, self_b, wall);
  return status;
}

// Threads for --threads 0: one per CPU this process may run on.
unsigned default_threads() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return 1;
  return unsigned(std::max(1, CPU_COUNT(&cpus)));
}

}  // namespace

int run_loadgen(const LoadgenOptions& o) {
  auto address = parse_address(o.scheduler);
  if (!address) return exit_on("psched-loadgen", address.status());
  asio::io_context resolver_io;
  boost::system::error_code ec;
  auto endpoints = asio::ip::tcp::resolver(resolver_io).resolve(address->host, std::to_string(address->port), ec);
  if (ec || endpoints.empty()) {
    fmt::print(stderr, "psched-loadgen: cannot resolve {}: {}\n", o.scheduler, ec.message());
    return kExitUsage;
  }
  const asio::ip::tcp::endpoint endpoint = endpoints.begin()->endpoint();

  DeviceModel device;
  device.seconds_per_element = o.element_ps * 1e-12;
  device.seconds_per_chunk = o.chunk_ns * 1e-9;
  device.slots = o.slots;
  device.window_elements = o.window_elements;
  device.corrupt_chunk = o.corrupt_chunk;
  device.crash_chunk = o.crash_chunk;
  device.result_batch = o.result_batch;
  const unsigned threads = o.threads > 0 ? o.threads : default_threads();
  fmt::print("loadgen_threads: {}\n", threads);
  Shards shards(threads, endpoint, device);

  Figures figures;
  if (!register_fleet(shards, o, figures)) return kExitUsage;
  if (o.idle_s > 0) watch_idle(shards.main_io(), o, figures);
  const int status = o.clients > 0 ? run_clients(shards, endpoint, o, figures) : 0;
  shards.on_each([](Shard& s, size_t) { s.fleet.stop(); });
  // Let the Goodbyes go out; nothing waits on them.
  run_until(shards.main_io(), [] { return false; }, 0.2);
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
