// pcuda-worker: flags -> backend + Worker on one event loop; with several GPUs (or --nworkers) the
// process becomes a supervisor of one worker process per device.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <boost/asio.hpp>
#include <spdlog/spdlog.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "app/cli_checks.h"
#include "app/exit_codes.h"
#include "app/logging.h"
#include "app/process.h"
#include "core/reader_share.h"
#include "core/worker_info.h"
#include "net/event_loop.h"
#include "net/scheduler_file.h"
#include "net/token.h"
#include "worker/backend_factory.h"
#include "worker/supervisor.h"
#include "worker/worker.h"

namespace {

std::string default_name() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return std::string(host) + "-" + std::to_string(getpid());
}

// --gpus all|0,2,...: the device indices to run on, given `available` devices.
psched::StatusOr<std::vector<int>> parse_gpus(const std::string& text, int available) {
  std::vector<int> out;
  if (text == "all") {
    for (int i = 0; i < available; ++i) out.push_back(i);
    return out;
  }
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      return psched::Status::invalid("--gpus must be 'all' or a list like 0,2 (got '" + text + "')");
    if (v >= available)
      return psched::Status::invalid("--gpus " + text + ": GPU " + std::to_string(v) + " does not exist (" +
                                     std::to_string(available) + " visible)");
    out.push_back(int(v));
  }
  return out;
}

// Everything the command line sets.
struct Flags {
  psched::WorkerConfig config;
  psched::BackendChoice backend;
  std::string gpus = "all";
  std::string token_file;
  psched::TlsFiles tls;
  std::string log_level = "info";
  int nworkers = 1;
  int64_t spin_us = psched::kDefaultSpin.count();
  bool version = false;
  bool no_pin = false;  // --no-pin: leave the GPU worker on every CPU
};

void add_flags(CLI::App& app, Flags& f) {
  app.failure_message(psched::cli::one_line_failure("pcuda-worker"));
  app.add_option("scheduler", f.config.scheduler_address,
                 "Scheduler address: tcp://HOST:PORT, tls://HOST:PORT, HOST:PORT or HOST (port 8786)")
      ->check(psched::cli::non_empty());
  app.add_option("--scheduler-file", f.config.scheduler_file,
                 "Read the scheduler's address from this file (waiting for it to appear)")
      ->check(psched::cli::non_empty());
  app.add_option("--backend", f.backend.kind, "auto (GPU if usable, else CPU), cpu or cuda")
      ->capture_default_str()->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--gpus", f.gpus, "GPUs to use: all or a list like 0,2 (one worker process each)")
      ->capture_default_str();
  app.add_option("--nthreads", f.backend.threads, "CPU backend threads per worker (default: cores)")
      ->transform(psched::cli::unsigned_in(1, 4096));
  app.add_option("--streams", f.backend.streams,
                 "CUDA backend: chunks in flight on each GPU, one stream and chunk buffer each "
                 "(default 6; fewer when memory is short)")
      ->transform(psched::cli::unsigned_in(1, 32));
  app.add_option("--readers", f.backend.readers,
                 "CUDA backend, stored arrays (--input): chunks read or decompressed at once, each "
                 "by a thread of its own sharing the cores (default: one per core of the GPU's share "
                 "of the host, cores / GPUs with --gpus, 4 to 32)")
      ->transform(psched::cli::unsigned_in(1, 32));
  app.add_option("--pinned-limit", f.backend.pinned_limit_bytes,
                 "CUDA backend, stored arrays: pinned host memory the readers may hold, e.g. 4GB; "
                 "fewer chunks are read at once when it is short (default: an eighth of the host's memory)")
      ->transform(CLI::AsSizeValue(true));
  app.add_option("--register-limit", f.backend.register_limit_bytes,
                 "CUDA backend, .npy, raw and npy stack files (not 64-bit integers): how much of them may be registered "
                 "with CUDA at once, their chunks then copied from the page cache with no staging; "
                 "0 stages every chunk (default: half the host's memory, shared by the GPUs of --gpus)")
      ->transform(CLI::AsSizeValue(true));
  app.add_option("--nworkers", f.nworkers, "CPU backend: number of worker processes to supervise")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 1024));
  app.add_option("--name", f.config.name, "Worker name shown by the scheduler (default HOST-PID)")
      ->check(CLI::Validator(
          [](std::string& name) {
            return name.size() <= psched::kMaxPeerNameBytes
                       ? std::string()
                       : fmt::format("--name is {} bytes long; at most {}", name.size(),
                                     psched::kMaxPeerNameBytes);
          },
          "", ""));
  // kB, MB, GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024.
  app.add_option("--memory-limit", f.backend.memory_limit_bytes,
                 "Device (or host) memory the worker may take for chunk buffers, e.g. 16GB; 0 = "
                 "no limit")
      ->capture_default_str()->transform(CLI::AsSizeValue(true));
  app.add_option("--death-timeout", f.config.death_timeout_s,
                 "Exit when no scheduler is reachable for this many seconds (default: never)")
      ->transform(psched::cli::unsigned_in(0, 31536000));
  app.add_option("--token-file", f.token_file, "File holding the cluster token (or set PSCHED_TOKEN)");
  psched::cli::add_tls_flags(app, f.tls, "this worker's");
  app.add_option("--spin-us", f.spin_us,
                 "Microseconds to keep polling after each event before sleeping (lower latency on "
                 "VMs, where waking an idle CPU is slow); 0 = sleep at once")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 1000000));
  app.add_option("--log-level", f.log_level, "trace, debug, info, warning, error")->capture_default_str();
  app.add_flag("--version", f.version, "Print the version and the compiled backends");
  app.add_flag("--no-pin", f.no_pin,
               "GPU workers: do not pin each worker to the CPUs nearest its GPU (NVML's affinity)");
}

// What the flags do not say: logging, the token, test-only fault switches from the environment.
// Returns the exit code on a failure.
std::optional<int> complete(Flags& f) {
  if (psched::Status st = psched::setup_logging("pcuda-worker", f.log_level); !st)
    return psched::exit_on("pcuda-worker", st);
  if (f.config.scheduler_address.empty() && f.config.scheduler_file.empty())
    return psched::exit_on("pcuda-worker", psched::Status::invalid(
        "give the scheduler address (e.g. tcp://HOST:8786) or --scheduler-file"));
  if (!f.config.scheduler_file.empty()) {
    if (psched::Status st = psched::check_scheduler_file_path(f.config.scheduler_file, false); !st)
      return psched::exit_on("pcuda-worker", st);
  }
  f.backend.spin = std::chrono::microseconds(f.spin_us);
  auto token = psched::load_token(f.token_file);
  if (!token) return psched::exit_on("pcuda-worker", token.status());
  f.config.token = *token;
  if (f.tls.any()) {
    auto tls = psched::make_tls_context(f.tls, psched::TlsRole::kClient);
    if (!tls) return psched::exit_on("pcuda-worker", tls.status());
    f.config.tls = *tls;
  }
  // Test-only fault switches: environment only, never reachable from the network.
  if (const char* crash = std::getenv("PSCHED_TEST_CRASH_ON_CHUNK")) f.config.crash_on_chunk = std::atoll(crash);
  if (const char* delay = std::getenv("PSCHED_TEST_CHUNK_DELAY_MS")) f.backend.test_delay_ms = std::atoi(delay);
  if (const char* fault = std::getenv("PSCHED_TEST_DEVICE_FAULT_ON_CHUNK")) f.backend.test_fault_on_chunk = std::atoll(fault);
  if (const char* band = std::getenv("PSCHED_TEST_BAND_BYTES")) f.backend.band_bytes = std::strtoull(band, nullptr, 10);
  if (const char* flip = std::getenv("PSCHED_TEST_FLIP_CHUNK")) f.config.flip_chunk = std::atoll(flip);
  if (const char* flip = std::getenv("PSCHED_TEST_FLIP_SQUARES_CHUNK")) f.config.flip_squares_chunk = std::atoll(flip);
  if (const char* lie = std::getenv("PSCHED_TEST_LIE_FROM_CHUNK")) f.config.lie_from_chunk = std::atoll(lie);
  if (f.config.name.empty()) f.config.name = default_name();
  return std::nullopt;
}

// One supervised worker process: this binary again, with the flags every child shares, `backend`
// and `name`; the caller adds what is particular to the child.
psched::SupervisedChild child_worker(const Flags& f, std::string label, const std::string& backend,
                                     const std::string& name) {
  psched::SupervisedChild c;
  c.label = std::move(label);
  c.spec.path = psched::self_exe_path();
  c.spec.env["PSCHED_SUPERVISED"] = "1";
  if (!f.config.token.empty()) c.spec.env["PSCHED_TOKEN"] = f.config.token;
  c.spec.args = {"--backend", backend, "--name", name,
                 "--memory-limit", std::to_string(f.backend.memory_limit_bytes),
                 "--log-level", f.log_level, "--spin-us", std::to_string(f.spin_us)};
  if (!f.config.scheduler_address.empty()) c.spec.args.push_back(f.config.scheduler_address);
  if (!f.config.scheduler_file.empty())
    c.spec.args.insert(c.spec.args.end(), {"--scheduler-file", f.config.scheduler_file});
  if (f.tls.any())
    c.spec.args.insert(c.spec.args.end(), {"--tls-ca-file", f.tls.ca_file, "--tls-cert", f.tls.cert_file,
                                           "--tls-key", f.tls.key_file});
  if (f.config.death_timeout_s > 0)
    c.spec.args.insert(c.spec.args.end(), {"--death-timeout", std::to_string(f.config.death_timeout_s)});
  if (f.no_pin) c.spec.args.push_back("--no-pin");
  return c;
}

// CUDA_VISIBLE_DEVICES as a list, so that GPU i of the selection names the device the parent saw.
std::vector<std::string> visible_device_ids() {
  std::vector<std::string> ids;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || !*visible) return ids;
  std::stringstream in(visible);
  std::string id;
  while (std::getline(in, id, ',')) ids.push_back(id);
  return ids;
}

// The worker processes to supervise: one per selected GPU when there are several (or --gpus picks
// some), else --nworkers of them; none when this process is the worker.
psched::StatusOr<std::vector<psched::SupervisedChild>> children_to_supervise(const Flags& f) {
  std::vector<psched::SupervisedChild> children;
  if (f.backend.kind != "cpu" && !std::getenv("PSCHED_SUPERVISED")) {
    std::string why;
    const int devices = psched::usable_cuda_devices(&why);
    if (devices == 0 && f.backend.kind == "cuda")
      return psched::Status::error("--backend cuda: no usable GPU (" + why + ")");
    if (devices > 0) {
      auto selected = parse_gpus(f.gpus, devices);
      if (!selected) return selected.status();
      const std::vector<std::string> visible_ids = visible_device_ids();
      if (selected->size() > 1 || f.gpus != "all") {
        for (int gpu : *selected) {
          auto c = child_worker(f, "gpu " + std::to_string(gpu), "cuda",
                                f.config.name + "-gpu" + std::to_string(gpu));
          c.spec.env["CUDA_VISIBLE_DEVICES"] =
              gpu < int(visible_ids.size()) ? visible_ids[size_t(gpu)] : std::to_string(gpu);
          if (f.backend.streams > 0)
            c.spec.args.insert(c.spec.args.end(), {"--streams", std::to_string(f.backend.streams)});
          // Each GPU's worker reads with its share of the cores unless --readers says otherwise.
          const unsigned readers = f.backend.readers > 0 ? unsigned(f.backend.readers)
                                                         : psched::readers_per_gpu(unsigned(selected->size()));
          c.spec.args.insert(c.spec.args.end(), {"--readers", std::to_string(readers)});
          if (f.backend.pinned_limit_bytes > 0)
            c.spec.args.insert(c.spec.args.end(), {"--pinned-limit", std::to_string(f.backend.pinned_limit_bytes)});
          // And its share of what may be registered (half the host's memory among the GPUs).
          const uint64_t register_limit = f.backend.register_limit_bytes != UINT64_MAX
                                              ? f.backend.register_limit_bytes
                                              : psched::register_limit_per_gpu(unsigned(selected->size()));
          c.spec.args.insert(c.spec.args.end(), {"--register-limit", std::to_string(register_limit)});
          children.push_back(std::move(c));
        }
      }
    }
  }
  if (children.empty() && f.nworkers > 1) {
    for (int i = 0; i < f.nworkers; ++i) {
      auto c = child_worker(f, "worker " + std::to_string(i), f.backend.kind,
                            f.config.name + "-" + std::to_string(i));
      if (f.backend.threads > 0)
        c.spec.args.insert(c.spec.args.end(), {"--nthreads", std::to_string(f.backend.threads)});
      children.push_back(std::move(c));
    }
  }
  return children;
}

// NVML for the backend's GPU, when there is one and the driver's library loads: one log line when
// it does not, and the worker runs on without GPU health. The test-only switches point it at
// another library (PSCHED_TEST_NVML_LIBRARY) and give a CPU worker a bus id to look up
// (PSCHED_TEST_NVML_PCI_BUS_ID), so that CI without a GPU drives the path through a stand-in.
std::unique_ptr<psched::NvmlDevice> open_nvml(const psched::Backend& backend) {
  std::string bus_id = backend.pci_bus_id();
  std::string library = "libnvidia-ml.so.1";
  if (const char* b = std::getenv("PSCHED_TEST_NVML_PCI_BUS_ID")) bus_id = b;
  if (const char* l = std::getenv("PSCHED_TEST_NVML_LIBRARY")) library = l;
  if (bus_id.empty()) return nullptr;  // no GPU: nothing to watch, nothing to say
  auto device = psched::NvmlDevice::open(library, bus_id);
  if (!device) {
    spdlog::warn("no GPU health from NVML ({}); the worker runs on without it", device.message());
    return nullptr;
  }
  spdlog::info("NVML watches GPU {}", bus_id);
  return std::move(*device);
}

// Pins this process to the CPUs nearest its GPU (NVML's ideal affinity), as dask-cuda does, before
// the backend and sampler start their threads (they inherit it). Returns the CPUs as a list, ""
// when not pinned. Only a CUDA backend is pinned: the test switch's stand-in GPU must not move CPU
// workers.
std::string pin_near_gpu(const psched::NvmlDevice& nvml, const psched::Backend& backend) {
  if (backend.pci_bus_id().empty()) return "";
  const std::vector<int> cpus = nvml.cpu_affinity();
  if (cpus.empty()) return "";
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c < CPU_SETSIZE) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    spdlog::warn("cannot pin to the GPU's CPUs {}: {}", psched::cpu_list(cpus), std::strerror(errno));
    return "";
  }
  spdlog::info("pinned to CPUs {} (nearest the GPU; --no-pin turns this off)", psched::cpu_list(cpus));
  return psched::cpu_list(cpus);
}

// How long a stop may take before the worker gives up on it: leaving joins the backend's threads,
// and a device call that never returns (a hung kernel) holds one of them for good. Below the
// supervisor's grace (SupervisorOptions::stop_grace_ms, 5 s), so a child says why itself.
constexpr std::chrono::seconds kStopDeadline{3};

// After the first stop signal, nothing may wait for the event loop, which a hung stop blocks: a
// second SIGINT/SIGTERM/SIGHUP ends the process at once (a plain handler, not the loop's), and a
// stop still running after kStopDeadline ends it with kExitDeviceHung. The watchdog thread is
// joined when the stop finishes in time: nothing of ours outlives run_worker (a thread still starting
// as main returns races the exit, and LeakSanitizer's exit-time check, which may see it come).
class StopDeadline {
 public:
  ~StopDeadline() {
    if (!watchdog_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    done_.notify_one();
    watchdog_.join();
  }

  void arm(boost::asio::signal_set& signals) {
    boost::system::error_code ignored;
    signals.clear(ignored);
    struct sigaction at_once = {};
    at_once.sa_handler = [](int) { _exit(psched::kExitFailure); };
    sigemptyset(&at_once.sa_mask);
    for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &at_once, nullptr);
    if (watchdog_.joinable()) return;
    watchdog_ = std::thread([this] {
      std::unique_lock lock(mutex_);
      if (done_.wait_for(lock, kStopDeadline, [this] { return stopped_; })) return;
      spdlog::error("the stop did not finish within {} s: a device call does not return; exiting {}",
                    kStopDeadline.count(), int(psched::kExitDeviceHung));
      spdlog::shutdown();
      _exit(psched::kExitDeviceHung);
    });
  }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool stopped_ = false;
  std::thread watchdog_;
};

// This process is the worker: backend + Worker on one event loop until it leaves.
int run_worker(const Flags& f) {
  auto made = psched::make_backend(f.backend);
  if (!made) return psched::exit_on("pcuda-worker", made.status());
  StopDeadline deadline;  // destroyed after the worker: a backend whose threads hang is still watched
  boost::asio::io_context io;
  psched::WorkerConfig config = f.config;
  std::unique_ptr<psched::NvmlDevice> nvml = open_nvml(**made);
  if (nvml && !f.no_pin) config.cpu_affinity = pin_near_gpu(*nvml, **made);
  psched::Worker worker(io, config, std::move(*made));
  if (nvml) worker.watch_gpu(std::make_unique<psched::NvmlSampler>(std::move(nvml)));
  // SIGHUP (the terminal or session went away) is a clean stop too, said as such.
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    deadline.arm(signals);
    worker.leave(signo == SIGINT ? "SIGINT" : signo == SIGTERM ? "SIGTERM" : "SIGHUP: a hang-up stops a worker",
                 [&io] { io.stop(); });
  });
  worker.start();
  psched::run_spinning(io, f.backend.spin);
  return worker.exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"pcuda-worker: a psched worker daemon. Connects to the scheduler and computes chunks "
               "on its GPUs (one worker process per GPU) or, where there is none, on the CPU."};
  add_flags(app, flags);
  if (const std::optional<int> code = psched::cli::parse(app, argc, argv)) return *code;
  if (flags.version) {
    std::cout << "pcuda-worker " << PSCHED_VERSION << "\nbackends: " << psched::compiled_backends()
              << "\n";
    return 0;
  }
  if (auto failed = complete(flags)) return *failed;

  auto children = children_to_supervise(flags);
  if (!children) return psched::exit_on("pcuda-worker", children.status());
  if (!children->empty()) {
    spdlog::info("supervising {} worker processes", children->size());
    return psched::run_supervisor(std::move(*children), psched::SupervisorOptions{});
  }
  return run_worker(flags);
}
