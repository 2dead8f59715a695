// psched: the scheduler daemon. Flags -> SchedulerConfig -> Scheduler on one event loop.
#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "common/address.h"
#include "common/event_loop.h"
#include "common/logging.h"
#include "common/token.h"
#include "scheduler/dashboard.h"
#include "scheduler/scheduler.h"

int main(int argc, char** argv) {
  psched::SchedulerConfig config;
  std::string log_level = "info";
  std::string token_file;
  uint32_t worker_timeout_s = 30;
  uint32_t handshake_timeout_s = 10;
  int64_t spin_us = psched::kDefaultSpin.count();

  CLI::App app{"psched: the scheduler daemon of a psched cluster. Workers (pcuda-worker) register "
               "here; clients (pbench, libpclient) submit array-sum jobs."};
  app.set_version_flag("--version", std::string("psched ") + PSCHED_VERSION);
  app.add_option("--host", config.host, "Address to listen on (default: all interfaces)");
  app.add_option("--port", config.port, "TCP port for workers and clients; 0 picks a free port")
      ->capture_default_str();
  app.add_option("--dashboard-address", config.dashboard_address,
                 "HTTP dashboard HOST:PORT (or :PORT); 'none' disables it")
      ->capture_default_str();
  app.add_option("--scheduler-file", config.scheduler_file,
                 "Write the scheduler's address to this JSON file (atomically) once listening");
  app.add_option("--token-file", token_file,
                 "File holding a shared token that every worker and client must present "
                 "(or set PSCHED_TOKEN)");
  app.add_option("--worker-timeout", worker_timeout_s,
                 "Seconds of silence after which a worker is declared dead")
      ->capture_default_str()->check(CLI::Range(1u, 86400u));
  app.add_option("--allowed-failures", config.allowed_failures,
                 "A chunk that fails on this many workers fails its job")
      ->capture_default_str()->check(CLI::Range(1u, 1000u));
  app.add_option("--max-frame", config.max_frame_bytes, "Largest frame accepted, in bytes")
      ->capture_default_str()->check(CLI::Range(1024u, 1u << 30));
  app.add_option("--max-connections", config.max_connections, "Most connections open at once")
      ->capture_default_str()->check(CLI::Range(1u, 1000000u));
  app.add_option("--spin-us", spin_us,
                 "Microseconds to keep polling after each event before sleeping (lower latency on "
                 "VMs, where waking an idle CPU is slow); 0 = sleep at once")
      ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{1000000}));
  // Hidden (tests): seconds a new connection has to say Hello.
  app.add_option("--handshake-timeout", handshake_timeout_s)
      ->check(CLI::Range(1u, 3600u))->group("");
  app.add_option("--log-level", log_level, "trace, debug, info, warning, error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  config.worker_timeout_ms = worker_timeout_s * 1000;
  // Peers send something every heartbeat (Welcome says how often): at a quarter of the timeout, an
  // idle worker is never declared dead for being idle (at 1000 ms with --worker-timeout 1, idle
  // workers were lost and rejoined every two seconds).
  config.heartbeat_ms = std::min(config.heartbeat_ms, config.worker_timeout_ms / 4);
  // A dashboard given only a port listens where the scheduler does: `--host 127.0.0.1` keeps both
  // off the network, and the published URL names the same host.
  if (!config.host.empty() && !config.dashboard_address.empty() && config.dashboard_address[0] == ':')
    config.dashboard_address =
        (config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host) +
        config.dashboard_address;
  config.handshake_timeout_ms = handshake_timeout_s * 1000;

  if (psched::Status st = psched::setup_logging("psched", log_level); !st) {
    std::cerr << "psched: " << st.message() << "\n";
    return 2;
  }
  auto token = psched::load_token(token_file);
  if (!token) {
    std::cerr << "psched: " << token.message() << "\n";
    return 2;
  }
  config.token = *token;

  // --max-connections needs a descriptor each: lift the soft limit (often 1024) to the hard one, so
  // that the cap, not EMFILE, is what turns connections away.
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  boost::asio::io_context io;
  psched::Scheduler scheduler(io, config);
  if (psched::Status st = scheduler.start(); !st) {
    std::cerr << "psched: " << st.message() << "\n";
    return 1;
  }
  psched::Dashboard dashboard(io, scheduler);
  if (psched::Status st = dashboard.start(config.dashboard_address); !st) {
    std::cerr << "psched: " << st.message() << "\n";
    return 1;
  }
  if (psched::Status st = scheduler.publish(dashboard.url()); !st) {
    std::cerr << "psched: " << st.message() << "\n";
    return 1;
  }

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    scheduler.shutdown(signo == SIGINT ? "scheduler shutting down (SIGINT)"
                                       : "scheduler shutting down (SIGTERM)",
                       [&io] { io.stop(); });
    dashboard.stop();
    // A second signal, or peers that never read their goodbye, must not keep us up.
    signals.async_wait([&](const boost::system::error_code& ec2, int) {
      if (!ec2) io.stop();
    });
    auto deadline = std::make_shared<boost::asio::steady_timer>(io, std::chrono::seconds(3));
    deadline->async_wait([&io, deadline](const boost::system::error_code& ec2) {
      if (!ec2) io.stop();
    });
  });
  psched::run_spinning(io, std::chrono::microseconds(spin_us));
  spdlog::info("psched exited");
  return 0;
}
