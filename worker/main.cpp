// pcuda-worker: flags -> backend + Worker on one event loop; with several GPUs (or --nworkers) the
// process becomes a supervisor of one worker process per device.
#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <sstream>

#include "common/cli_checks.h"
#include "common/event_loop.h"
#include "common/logging.h"
#include "common/process.h"
#include "common/token.h"
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
psched::Result<std::vector<int>> parse_gpus(const std::string& text, int available) {
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
      return psched::Status::error("--gpus must be 'all' or a list like 0,2 (got '" + text + "')");
    if (v >= available)
      return psched::Status::error("--gpus " + text + ": GPU " + std::to_string(v) + " does not exist (" +
                                   std::to_string(available) + " visible)");
    out.push_back(int(v));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  psched::WorkerConfig config;
  psched::BackendChoice backend;
  std::string gpus = "all";
  std::string memory_limit = "0";
  std::string token_file;
  std::string log_level = "info";
  int nworkers = 1;
  int64_t spin_us = psched::kDefaultSpin.count();
  bool version = false;

  CLI::App app{"pcuda-worker: a psched worker daemon. Connects to the scheduler and computes chunks "
               "on its GPUs (one worker process per GPU) or, where there is none, on the CPU."};
  app.failure_message(psched::cli::one_line_failure("pcuda-worker"));
  app.add_option("scheduler", config.scheduler_address,
                 "Scheduler address: tcp://HOST:PORT, HOST:PORT or HOST (port 8786)")
      ->check(psched::cli::non_empty());
  app.add_option("--scheduler-file", config.scheduler_file,
                 "Read the scheduler's address from this file (waiting for it to appear)")
      ->check(psched::cli::non_empty());
  app.add_option("--backend", backend.kind, "auto (GPU if usable, else CPU), cpu or cuda")
      ->capture_default_str()->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--gpus", gpus, "GPUs to use: all or a list like 0,2 (one worker process each)")
      ->capture_default_str();
  app.add_option("--nthreads", backend.threads, "CPU backend threads per worker (default: cores)")
      ->transform(psched::cli::unsigned_in(1, 4096));
  app.add_option("--streams", backend.streams,
                 "CUDA backend: chunks in flight on each GPU, one stream and chunk buffer each "
                 "(default 6; fewer when memory is short)")
      ->transform(psched::cli::unsigned_in(1, 32));
  app.add_option("--nworkers", nworkers, "CPU backend: number of worker processes to supervise")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 1024));
  app.add_option("--name", config.name, "Worker name shown by the scheduler (default HOST-PID)");
  app.add_option("--memory-limit", memory_limit,
                 "Device (or host) memory the worker may take for chunk buffers, e.g. 16GB; 0 = "
                 "no limit")->capture_default_str();
  app.add_option("--death-timeout", config.death_timeout_s,
                 "Exit when no scheduler is reachable for this many seconds (default: never)")
      ->transform(psched::cli::unsigned_in(0, 31536000));
  app.add_option("--token-file", token_file, "File holding the cluster token (or set PSCHED_TOKEN)");
  app.add_option("--spin-us", spin_us,
                 "Microseconds to keep polling after each event before sleeping (lower latency on "
                 "VMs, where waking an idle CPU is slow); 0 = sleep at once")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 1000000));
  app.add_option("--log-level", log_level, "trace, debug, info, warning, error")->capture_default_str();
  app.add_flag("--version", version, "Print the version and the compiled backends");
  CLI11_PARSE(app, argc, argv);

  if (version) {
    std::cout << "pcuda-worker " << PSCHED_VERSION << "\nbackends: " << psched::compiled_backends()
              << "\n";
    return 0;
  }
  if (psched::Status st = psched::setup_logging("pcuda-worker", log_level); !st) {
    std::cerr << "pcuda-worker: " << st.message() << "\n";
    return 2;
  }
  if (config.scheduler_address.empty() && config.scheduler_file.empty()) {
    std::cerr << "pcuda-worker: give the scheduler address (e.g. tcp://HOST:8786) or --scheduler-file\n";
    return 2;
  }
  auto limit = psched::parse_bytes(memory_limit);
  if (!limit) {
    std::cerr << "pcuda-worker: --memory-limit: " << limit.message() << "\n";
    return 2;
  }
  backend.memory_limit_bytes = *limit;
  backend.spin = std::chrono::microseconds(spin_us);
  auto token = psched::load_token(token_file);
  if (!token) {
    std::cerr << "pcuda-worker: " << token.message() << "\n";
    return 2;
  }
  config.token = *token;
  // Test-only fault switches: environment only, never reachable from the network.
  if (const char* crash = std::getenv("PSCHED_TEST_CRASH_ON_CHUNK")) config.crash_on_chunk = std::atoll(crash);
  if (const char* delay = std::getenv("PSCHED_TEST_CHUNK_DELAY_MS")) backend.test_delay_ms = std::atoi(delay);
  if (const char* fault = std::getenv("PSCHED_TEST_DEVICE_FAULT_ON_CHUNK")) backend.test_fault_on_chunk = std::atoll(fault);
  if (config.name.empty()) config.name = default_name();

  // Several devices (or --nworkers): supervise one worker process each.
  std::vector<psched::SupervisedChild> children;
  if (backend.kind != "cpu" && !std::getenv("PSCHED_SUPERVISED")) {
    std::string why;
    const int devices = psched::usable_cuda_devices(&why);
    if (devices == 0 && backend.kind == "cuda") {
      std::cerr << "pcuda-worker: --backend cuda: no usable GPU (" << why << ")\n";
      return 1;
    }
    if (devices > 0) {
      auto selected = parse_gpus(gpus, devices);
      if (!selected) {
        std::cerr << "pcuda-worker: " << selected.message() << "\n";
        return 2;
      }
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      std::vector<std::string> visible_ids;
      if (visible && *visible) {
        std::stringstream in(visible);
        std::string id;
        while (std::getline(in, id, ',')) visible_ids.push_back(id);
      }
      if (selected->size() > 1 || gpus != "all") {
        for (int gpu : *selected) {
          psched::SupervisedChild c;
          c.label = "gpu " + std::to_string(gpu);
          c.spec.path = psched::self_exe_path();
          c.spec.env["CUDA_VISIBLE_DEVICES"] =
              gpu < int(visible_ids.size()) ? visible_ids[size_t(gpu)] : std::to_string(gpu);
          c.spec.args = {"--backend", "cuda", "--name", config.name + "-gpu" + std::to_string(gpu),
                         "--memory-limit", memory_limit, "--log-level", log_level,
                         "--spin-us", std::to_string(spin_us)};
          if (backend.streams > 0) {
            c.spec.args.push_back("--streams");
            c.spec.args.push_back(std::to_string(backend.streams));
          }
          children.push_back(std::move(c));
        }
      }
    }
  }
  if (children.empty() && nworkers > 1) {
    for (int i = 0; i < nworkers; ++i) {
      psched::SupervisedChild c;
      c.label = "worker " + std::to_string(i);
      c.spec.path = psched::self_exe_path();
      c.spec.args = {"--backend", backend.kind, "--name", config.name + "-" + std::to_string(i),
                     "--memory-limit", memory_limit, "--log-level", log_level,
                     "--spin-us", std::to_string(spin_us)};
      if (backend.threads > 0) {
        c.spec.args.push_back("--nthreads");
        c.spec.args.push_back(std::to_string(backend.threads));
      }
      children.push_back(std::move(c));
    }
  }
  if (!children.empty()) {
    for (auto& c : children) {
      c.spec.env["PSCHED_SUPERVISED"] = "1";
      if (!config.token.empty()) c.spec.env["PSCHED_TOKEN"] = config.token;
      if (!config.scheduler_address.empty()) c.spec.args.push_back(config.scheduler_address);
      if (!config.scheduler_file.empty()) {
        c.spec.args.push_back("--scheduler-file");
        c.spec.args.push_back(config.scheduler_file);
      }
      if (config.death_timeout_s > 0) {
        c.spec.args.push_back("--death-timeout");
        c.spec.args.push_back(std::to_string(config.death_timeout_s));
      }
    }
    spdlog::info("supervising {} worker processes", children.size());
    return psched::run_supervisor(std::move(children), psched::SupervisorOptions{});
  }

  auto made = psched::make_backend(backend);
  if (!made) {
    std::cerr << "pcuda-worker: " << made.message() << "\n";
    return 1;
  }
  boost::asio::io_context io;
  psched::Worker worker(io, config, std::move(*made));
  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    worker.leave(signo == SIGINT ? "SIGINT" : "SIGTERM", [&io] { io.stop(); });
    signals.async_wait([](const boost::system::error_code& ec2, int) {
      if (!ec2) std::_Exit(1);  // a second signal: at once
    });
  });
  worker.start();
  psched::run_spinning(io, backend.spin);
  return worker.exit_code();
}
