#include "burn.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "app/exit_codes.h"
#include "burn_ledger.h"
#include "burn_report.h"
#include "local_cluster.h"
#include "cluster_report.h"

namespace pbench {

namespace {

using Clock = std::chrono::steady_clock;

// The watcher asks for the workers this often: the heartbeat's own period, so each poll sees news.
constexpr auto kWatchPeriod = std::chrono::milliseconds(1000);
// A live line per GPU this often (a line a second per GPU would scroll a fleet's away).
constexpr double kLiveLineSeconds = 5;
// Jobs that fail in a row before the burn gives up (the scheduler is gone, or nothing can run).
constexpr int kMaxFailedJobsInARow = 3;
// The small-chunk shape: the main job's chunks cut this many times per side.
constexpr uint64_t kSmallChunkDivisor = 10;
// Jobs in flight at once, each on a connection of its own: while one job's last chunks finish and
// the next is submitted, the others keep the GPUs busy. 64 simulated H100s, whose jobs give each
// GPU ~50 ms of work, were busy 36 % of a burn with one job at a time, 85 % with two, 99 % with
// three (bench/burn_fleet.sh, bench/README.md).
constexpr int kJobsInFlight = 3;

// The first SIGINT/SIGTERM asks the burn to stop (the job in flight is cancelled, the report
// written); a second one is pbench's usual: stop the local cluster and exit at once.
std::atomic<int> g_stop_signal{0};

extern "C" void on_burn_stop(int sig) {
  g_stop_signal.store(sig);
  install_cleanup_handlers();  // only sigaction: safe in a handler
}

void install_burn_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_burn_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string job_text(const pclient::Job& job) {
  if (!job.input.path.empty())
    return fmt::format("{} ({} x {} in {} x {} chunks)", job.input.path, job.rows, job.cols, job.chunk_rows,
                       job.chunk_cols);
  return fmt::format("{} x {} {} in {} x {} chunks, {} seed {}", job.rows, job.cols, job.dtype, job.chunk_rows,
                     job.chunk_cols, job.generator, job.seed);
}

// The live line of one GPU: its throughput since the last line, and its latest NVML figures.
std::string live_line(const BurnGpu& g, double seconds) {
  const BurnGpu::Point& p = g.series.empty() ? BurnGpu::Point{} : g.series.back();
  std::string figures = g.has_gpu ? fmt::format("{:5.0f} MHz {:3.0f} C {:4.0f} W PCIe gen{} x{}", p.sm_clock_mhz,
                                                p.temperature_c, p.power_watts, g.last_health.pcie_generation,
                                                g.last_health.pcie_width)
                                  : std::string("(no NVML)");
  return fmt::format("burn {:6.1f} s: {:<16} {:>10}/s {}  errors {}{}", seconds, "'" + g.name + "'",
                     human_bytes(p.bytes_per_second), figures, g.failures.size(),
                     g.left_seconds >= 0 ? "  (gone)" : "");
}

// The second connection: the workers once a second into the ledger, live lines to stderr, and the
// verdicts so far back to the scheduler's dashboard (shown until this connection closes).
class Watcher {
 public:
  Watcher(pclient::Client client, BurnLedger& ledger, std::mutex& mutex, Clock::time_point t0, double total_seconds,
          std::chrono::milliseconds period, LocalCluster* local, bool live, bool quiet)
      : client_(std::move(client)),
        period_(period),
        local_(local),
        ledger_(ledger),
        mutex_(mutex),
        t0_(t0),
        total_seconds_(total_seconds),
        live_(live),
        quiet_(quiet) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Watcher() { stop(); }

  // One last look (a worker that died in the last second is seen gone), then the thread ends.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(stop_mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    poll();
    client_.close();
  }
  uint64_t polls() const { return polls_; }

 private:
  void poll() {
    // Local mode: a worker process that ended says how before psched's list drops it, so the
    // ledger has the cause when the worker is found gone.
    if (local_)
      for (const LocalCluster::WorkerExit& e : local_->reap_exited_workers()) {
        std::lock_guard<std::mutex> lock(mutex_);
        ledger_.note_process_exit(e.name, fmt::format("its process {} {}", e.pid, e.how), since(t0_));
      }
    try {
      std::vector<pclient::WorkerInfo> workers = client_.workers();
      pclient::BurnStatus status;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ledger_.observe(workers, since(t0_));
        announce_baselines();
        status = ledger_.status(since(t0_), total_seconds_);
      }
      client_.report_burn(status);
      ++polls_;
      for (const std::string& why : client_.take_refusals()) {  // the dashboard shows nothing: say why
        const std::string text = "psched refused the burn's status for its dashboard: " + why;
        if (!quiet_) std::fprintf(stderr, "pbench: burn: %s\n", text.c_str());
        std::lock_guard<std::mutex> lock(mutex_);
        ledger_.note_notice(text, since(t0_));
      }
    } catch (const pclient::Error& e) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!lost_) ledger_.note_job_error(std::string("watching the workers: ") + e.what(), since(t0_));
      lost_ = true;
    }
  }

  // Each GPU's NVML figures the burn compares against, once, when its first heartbeat with them
  // comes: what a person checks the verdict against (and a test's sign that the burn has them).
  void announce_baselines() {
    if (quiet_) return;
    for (const auto& [name, g] : ledger_.gpus()) {
      if (!g.has_gpu || !announced_.insert(name).second) continue;
      std::fprintf(stderr, "pbench: burn: '%s' baseline: %s, %s, PCIe gen%u of gen%u x%u of x%u\n", name.c_str(),
                   g.ecc_seen ? fmt::format("ECC uncorrected {}", g.ecc_uncorrected_start).c_str() : "no ECC",
                   g.remapped_rows.seen   ? fmt::format("remapped rows {}", g.remapped_rows.start).c_str()
                   : g.retired_pages.seen ? fmt::format("retired pages {}", g.retired_pages.start).c_str()
                                    : "remapped rows unknown",
                   g.pcie_generation, g.pcie_max_generation, g.pcie_width, g.pcie_max_width);
    }
  }

  void loop() {
    double last_live = 0;
    std::unique_lock<std::mutex> stop_lock(stop_mutex_);
    while (!wake_.wait_for(stop_lock, period_, [this] { return stopping_; })) {
      stop_lock.unlock();
      poll();
      const double now = since(t0_);
      if (live_ && now - last_live >= kLiveLineSeconds) {
        last_live = now;
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [name, g] : ledger_.gpus()) std::fprintf(stderr, "%s\n", live_line(g, now).c_str());
      }
      stop_lock.lock();
    }
  }

  pclient::Client client_;
  std::chrono::milliseconds period_;  // kWatchPeriod but in a benchmark
  LocalCluster* local_;  // pbench's local cluster, or nullptr (-d)
  BurnLedger& ledger_;
  std::mutex& mutex_;
  Clock::time_point t0_;
  double total_seconds_;
  bool live_, quiet_;
  std::set<std::string> announced_;
  bool lost_ = false;
  uint64_t polls_ = 0;  // looks that reached psched (workers asked, status sent)
  std::mutex stop_mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

psched::StatusOr<double> parse_burn_duration(const std::string& text) {
  const size_t digits = text.find_first_not_of("0123456789");
  const std::string number = text.substr(0, digits), unit = digits == std::string::npos ? "" : text.substr(digits);
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : 0;
  if (number.empty() || number.size() > 9 || scale == 0)
    return psched::Status::invalid(
        fmt::format("--burn: expected a duration like 90s, 10m or 2h (got '{}')", text));
  const double seconds = std::stod(number) * scale;
  if (seconds < 1 || seconds > 30 * 86400)
    return psched::Status::invalid(fmt::format("--burn: must be 1 s to 30 days (got '{}')", text));
  return seconds;
}

std::vector<pclient::Job> burn_jobs(const Flags& f) {
  // With --input (whose file fixes the shape: -x, -y and the chunks are refused) the generated
  // array takes the file's shape, chunks and selection, as normal(10, 1) float64 (or float32).
  pclient::Job generated = f.job;
  if (!f.input.path.empty()) {
    const pclient::Job defaults;
    generated.input = {};
    generated.generator = defaults.generator;
    generated.param0 = defaults.param0;
    generated.param1 = defaults.param1;
    if (generated.dtype != "float32") generated.dtype = "float64";
  }
  std::vector<pclient::Job> jobs{generated};
  pclient::Job small = generated;
  small.chunk_rows = std::max<uint64_t>(1, small.chunk_rows / kSmallChunkDivisor);
  small.chunk_cols = std::max<uint64_t>(1, small.chunk_cols / kSmallChunkDivisor);
  if (small.chunk_rows != generated.chunk_rows || small.chunk_cols != generated.chunk_cols) jobs.push_back(small);
  if (!f.input.path.empty()) jobs.push_back(f.job);
  return jobs;
}

int run_burn(pclient::Client& client, const pclient::ConnectOptions& connect, const Flags& f, LocalCluster* local) {
  const bool live = !f.json && !f.quiet;
  BurnLedger ledger(BurnLimits{f.burn_slow_fraction, f.burn_max_temperature_c});
  std::mutex mutex;  // guards ledger: the watcher's thread and this one
  install_burn_stop_handlers();
  const std::vector<pclient::Job> jobs = burn_jobs(f);
  if (!f.json) {
    std::vector<std::string> shapes;
    for (const auto& j : jobs) shapes.push_back(job_text(j));
    std::printf("Burn: %.0f s of verified jobs (%s; a fresh seed each turn) on %zu workers\n", f.burn_seconds,
                fmt::format("{}", fmt::join(shapes, "; ")).c_str(), client.workers().size());
    std::fflush(stdout);
  }
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point deadline = t0 + std::chrono::milliseconds(int64_t(f.burn_seconds * 1000));
  BurnTotals totals;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ledger.observe(client.workers(), 0);
  }
  // For bench/burn_fleet.sh, which measures what the watcher costs psched: its baseline is the
  // burn's jobs alone, with no watcher (PSCHED_BENCH_BURN_JOBS_ONLY=1: no polls of the workers, no
  // status for the dashboard), and it magnifies the watcher's cost by polling more often
  // (PSCHED_BENCH_BURN_WATCH_MS).
  const char* jobs_only = std::getenv("PSCHED_BENCH_BURN_JOBS_ONLY");
  std::chrono::milliseconds watch_period = kWatchPeriod;
  if (const char* ms = std::getenv("PSCHED_BENCH_BURN_WATCH_MS"); ms && std::atoi(ms) > 0)
    watch_period = std::chrono::milliseconds(std::atoi(ms));
  std::optional<Watcher> watcher;
  if (!(jobs_only && std::string(jobs_only) == "1"))
    watcher.emplace(pclient::Client::connect(connect), ledger, mutex, t0, f.burn_seconds, watch_period, local, live,
                    f.quiet);
  // kJobsInFlight loops, each running jobs one after another on its connection; they share the
  // turns (so the shapes and seeds alternate as with one), the ledger and the totals (under mutex).
  std::atomic<uint64_t> next_turn{0};
  std::atomic<int> failed_in_a_row{0};
  std::atomic<bool> give_up{false};
  auto run_jobs = [&](pclient::Client& c) {
    while (!give_up.load() && g_stop_signal.load() == 0 && Clock::now() < deadline) {
      const uint64_t i = next_turn++;
      pclient::Job job = jobs[i % jobs.size()];
      if (job.input.path.empty()) job.seed += i;  // fresh data every turn
      pclient::RunOptions options;
      options.verify = 1.0;
      options.no_workers_timeout_ms = f.no_workers_timeout_ms;
      options.should_cancel = [deadline, &give_up] {
        return give_up.load() || g_stop_signal.load() != 0 || Clock::now() >= deadline;
      };
      options.on_progress = [&](const pclient::Progress& p) {
        if (p.notices.empty()) return;
        std::lock_guard<std::mutex> lock(mutex);
        for (const std::string& n : p.notices) {
          if (live) std::fprintf(stderr, "pbench: %s\n", n.c_str());
          ledger.note_notice(n, since(t0));
        }
      };
      try {
        const pclient::Result r = c.run(job, options);
        failed_in_a_row = 0;
        std::lock_guard<std::mutex> lock(mutex);
        ledger.note_result(r, job_text(job));
        ++totals.jobs;
        totals.chunks += r.chunks;
        totals.verified_chunks += r.verified_chunks;
        totals.bytes += job.bytes();
      } catch (const pclient::Cancelled&) {
        std::lock_guard<std::mutex> lock(mutex);
        ++totals.jobs_cut;  // the deadline or Ctrl-C: its chunks count in the GPUs' throughput only
        return;
      } catch (const pclient::Error& e) {
        std::lock_guard<std::mutex> lock(mutex);
        ledger.note_job_error(fmt::format("job ({}) failed: {}", job_text(job), e.what()), since(t0));
        if (++failed_in_a_row >= kMaxFailedJobsInARow) give_up = true;
      }
    }
  };
  std::vector<pclient::Client> more;
  std::vector<std::thread> loops;
  try {
    for (int k = 1; k < kJobsInFlight; ++k) more.push_back(pclient::Client::connect(connect));
  } catch (const pclient::Error& e) {
    std::fprintf(stderr, "pbench: burn: one job at a time (a second connection failed: %s)\n", e.what());
  }
  for (pclient::Client& c : more) loops.emplace_back([&run_jobs, &c] { run_jobs(c); });
  run_jobs(client);
  for (std::thread& t : loops) t.join();
  if (watcher) {
    watcher->stop();
    if (watch_period != kWatchPeriod)
      std::fprintf(stderr, "pbench: burn: the watcher looked %llu times\n", (unsigned long long)watcher->polls());
  }
  totals.seconds = since(t0);
  totals.asked_seconds = f.burn_seconds;
  totals.interrupted_by = g_stop_signal.load();
  ledger.finish(totals.seconds);
  if (totals.interrupted_by != 0)
    std::fprintf(stderr, "pbench: burn interrupted after %.1f s; reporting what ran\n", totals.seconds);
  const nlohmann::json report = burn_report_json(ledger, totals);
  if (!f.burn_report.empty())
    if (psched::Status st = write_burn_report(f.burn_report, report); !st) return psched::exit_on("pbench", st);
  if (f.json) std::printf("%s\n", report.dump().c_str());
  else print_burn_text(report);
  const pclient::BurnVerdict verdict = ledger.cluster_verdict();
  if (totals.interrupted_by != 0 && verdict != pclient::BurnVerdict::kFail) return psched::exit_code_for_signal(totals.interrupted_by);
  return burn_exit_code(verdict);
}

}  // namespace pbench
