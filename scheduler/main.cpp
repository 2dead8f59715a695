// psched: the scheduler daemon. Flags -> SchedulerConfig -> Scheduler on one event loop.
#include <CLI/CLI.hpp>
#include <boost/asio.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <vector>
#include <cstdlib>
#include <optional>

#include "app/cli_checks.h"
#include "app/exit_codes.h"
#include "app/logging.h"
#include "net/address.h"
#include "net/event_loop.h"
#include "net/framing.h"
#include "net/scheduler_file.h"
#include "net/token.h"
#include "scheduler/dashboard/dashboard.h"
#include "scheduler/scheduler.h"

namespace {

// Everything the command line sets.
struct Flags {
  psched::SchedulerConfig config;
  std::string log_level = "info";
  std::string token_file;
  psched::TlsFiles tls;
  uint32_t worker_timeout_s = 30;
  uint32_t stall_timeout_s = 10;
  uint32_t handshake_timeout_s = 5;
  int64_t spin_us = psched::kDefaultSpin.count();
  bool max_connections_given = false;  // --max-connections was on the command line
};

void add_flags(CLI::App& app, Flags& f) {
  app.set_version_flag("--version", std::string("psched ") + PSCHED_VERSION);
  app.failure_message(psched::cli::one_line_failure("psched"));
  app.add_option("--host", f.config.host, "Address to listen on (default: all interfaces)");
  app.add_option("--port", f.config.port, "TCP port for workers and clients; 0 picks a free port")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 65535));
  app.add_option("--dashboard-address", f.config.dashboard_address,
                 "HTTP dashboard HOST:PORT (or :PORT); 'none' disables it")
      ->capture_default_str()->check(psched::cli::non_empty());
  app.add_option("--scheduler-file", f.config.scheduler_file,
                 "Write the scheduler's address to this JSON file (atomically) once listening")
      ->check(psched::cli::non_empty());
  app.add_option("--token-file", f.token_file,
                 "File holding a shared token that every worker and client must present "
                 "(or set PSCHED_TOKEN)");
  psched::cli::add_tls_flags(app, f.tls, "the scheduler's");
  app.add_option("--worker-timeout", f.worker_timeout_s,
                 "Seconds of silence after which a worker is declared dead")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 86400));
  app.add_option("--stall-timeout", f.stall_timeout_s,
                 "Seconds a worker holding work may report no progress (its heartbeat going on: a "
                 "hung kernel) before its work runs elsewhere; longer where its chunks are long; 0 = never")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 86400));
  app.add_option("--allowed-failures", f.config.allowed_failures,
                 "A chunk that fails on this many workers fails its job")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 1000));
  app.add_option("--max-frame", f.config.max_frame_bytes, "Largest frame accepted, in bytes")
      ->capture_default_str()->transform(psched::cli::unsigned_in(psched::kMinMaxFrameBytes, 1u << 30));
  app.add_option("--max-connections", f.config.max_connections,
                 "Most workers and clients connected at once (lowered to what the file descriptor "
                 "limit holds unless given)")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 1000000));
  app.add_option("--max-pending-connections", f.config.admission.max_pending_connections,
                 "Most connections that have not said Hello yet; past it the oldest is closed")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, 1000000));
  app.add_option("--max-jobs", f.config.admission.max_jobs,
                 "Most running jobs of all clients together (a few KB of scheduler memory each, "
                 "whatever their size)")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, uint64_t{1} << 24));
  app.add_option("--max-client-jobs", f.config.admission.max_client_jobs,
                 "Most running jobs of one client (its share of --max-jobs)")
      ->capture_default_str()->transform(psched::cli::unsigned_in(1, uint64_t{1} << 24));
  app.add_option("--max-client-unsent", f.config.max_client_unsent_bytes,
                 "Most bytes held unsent for one client that does not read what it is sent (its "
                 "streamed partials, progress); past it the client is cut off")
      ->capture_default_str()->transform(psched::cli::unsigned_in(64u << 10, uint64_t{1} << 40));
  app.add_option("--max-total-unsent", f.config.max_total_unsent_bytes,
                 "Most bytes held unsent for all clients together; past it the client holding the "
                 "most is cut off")
      ->capture_default_str()->transform(psched::cli::unsigned_in(64u << 10, uint64_t{1} << 40));
  app.add_option("--spin-us", f.spin_us,
                 "Microseconds to keep polling after each event before sleeping (lower latency on "
                 "VMs, where waking an idle CPU is slow); 0 = sleep at once")
      ->capture_default_str()->transform(psched::cli::unsigned_in(0, 1000000));
  // Hidden (tests): seconds a new connection has to say Hello.
  app.add_option("--handshake-timeout", f.handshake_timeout_s)
      ->transform(psched::cli::unsigned_in(1, 3600, "--handshake-timeout"))->group("");
  app.add_option("--log-level", f.log_level, "trace, debug, info, warning, error")
      ->capture_default_str();
}

// What proves peers to us and us to them: read at start, and again on SIGHUP (rotation).
struct Credentials {
  std::string token;
  std::shared_ptr<boost::asio::ssl::context> tls, dashboard_tls;  // null: plain TCP and HTTP
};

psched::StatusOr<Credentials> load_credentials(const Flags& f) {
  Credentials c;
  auto token = psched::load_token(f.token_file);
  if (!token) return token.status();
  c.token = *token;
  if (f.tls.any()) {
    auto tls = psched::make_tls_context(f.tls, psched::TlsRole::kServer);
    if (!tls) return tls.status();
    auto https = psched::make_tls_context(f.tls, psched::TlsRole::kHttpsServer);
    if (!https) return https.status();
    c.tls = *tls;
    c.dashboard_tls = *https;
  }
  return c;
}

// SIGHUP, as daemons do: the certificates and the token are read again (rotation without a
// restart) and used for new connections; every job keeps running. A reload that fails changes
// nothing. psched logs to stderr (journald, or a file by redirection): no log file to reopen.
void reload_on_hangup(const Flags& f, psched::Scheduler& scheduler, psched::Dashboard& dashboard) {
  auto c = load_credentials(f);
  if (!c) {
    spdlog::error("SIGHUP: reload failed, keeping the current certificates and token: {}", c.message());
    return;
  }
  scheduler.reload_credentials(c->tls, c->dashboard_tls, c->token);
  dashboard.reload_credentials();
  std::vector<std::string> what;
  if (f.tls.any()) what.push_back(fmt::format("the TLS certificate '{}', key '{}' and CA '{}'", f.tls.cert_file,
                                              f.tls.key_file, f.tls.ca_file));
  if (!f.token_file.empty()) what.push_back(fmt::format("the token from '{}'", f.token_file));
  const size_t jobs = scheduler.jobs().size();
  const std::string going = fmt::format("{} running job{} go{} on", jobs, jobs == 1 ? "" : "s", jobs == 1 ? "es" : "");
  if (what.empty())
    spdlog::info("SIGHUP: nothing to reload (no --tls-* or --token-file); {}", going);
  else
    spdlog::info("SIGHUP: reloaded {}; {}", fmt::join(what, " and "), going);
}

// Descriptors psched holds besides its peers' connections: listeners, the event loop's, the
// scheduler file being written, standard streams; generously.
constexpr uint64_t kOwnDescriptors = 64;

// Every connection holds a descriptor: the workers and clients of --max-connections, the peers not
// past Hello yet (--max-pending-connections), the dashboard's sessions, and psched's own few. The
// soft limit (often 1024) is lifted to the hard one. A cap the limit cannot hold is refused when it
// was asked for, and lowered, with a line saying so, when it is the default: the cap, not EMFILE
// (accepts paused, a peer left waiting with no answer), is what must turn connections away.
std::optional<int> fit_connections_to_descriptors(Flags& f) {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0) return std::nullopt;
  if (nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) getrlimit(RLIMIT_NOFILE, &nofile);
  }
  if (nofile.rlim_cur == RLIM_INFINITY) return std::nullopt;
  const uint64_t limit = nofile.rlim_cur;
  const uint64_t pending = f.config.admission.max_pending_connections;
  const uint64_t others = pending + psched::Dashboard::kMaxSessions + kOwnDescriptors;
  const uint64_t room = limit > others ? limit - others : 0;
  uint32_t& cap = f.config.max_connections;
  if (cap <= room) return std::nullopt;
  if (f.max_connections_given || room == 0) {
    return psched::exit_on(
        "psched", psched::Status::invalid(fmt::format(
                      "--max-connections {} and --max-pending-connections {} need {} file descriptors (with the "
                      "dashboard's {} and psched's own), but psched may open {} (ulimit -n): raise the limit "
                      "(ulimit -n, systemd LimitNOFILE=, docker --ulimit nofile=) or lower those options",
                      cap, pending, uint64_t(cap) + others, psched::Dashboard::kMaxSessions, limit)));
  }
  spdlog::warn("--max-connections lowered from {} to {}: that is what the {} file descriptors psched may open "
               "(ulimit -n) hold; raise the limit (ulimit -n, systemd LimitNOFILE=) for more",
               cap, room, limit);
  cap = uint32_t(room);
  return std::nullopt;
}

// The config from the flags, with the token loaded and logging set up; an error is the exit code.
std::optional<int> complete(Flags& f) {
  psched::SchedulerConfig& config = f.config;
  config.worker_timeout_ms = f.worker_timeout_s * 1000;
  config.stall_timeout_ms = f.stall_timeout_s * 1000;
  // A dashboard given only a port listens where the scheduler does: `--host 127.0.0.1` keeps both
  // off the network, and the published URL names the same host.
  if (!config.host.empty() && !config.dashboard_address.empty() && config.dashboard_address[0] == ':')
    config.dashboard_address =
        (config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host) +
        config.dashboard_address;
  config.handshake_timeout_ms = f.handshake_timeout_s * 1000;

  if (psched::Status st = psched::setup_logging("psched", f.log_level); !st) return psched::exit_on("psched", st);
  if (auto failed = fit_connections_to_descriptors(f)) return failed;
  if (!config.scheduler_file.empty()) {
    if (psched::Status st = psched::check_scheduler_file_path(config.scheduler_file, /*to_write=*/true); !st)
      return psched::exit_on("psched", st);
  }
  auto credentials = load_credentials(f);
  if (!credentials) return psched::exit_on("psched", credentials.status());
  config.token = credentials->token;
  config.tls = credentials->tls;
  config.dashboard_tls = credentials->dashboard_tls;
  return std::nullopt;
}

// The scheduler and its dashboard on one event loop until SIGTERM/SIGINT drains them.
int run(const Flags& f) {
  const psched::SchedulerConfig& config = f.config;
  boost::asio::io_context io;
  psched::Scheduler scheduler(io, config);
  if (psched::Status st = scheduler.start(); !st) return psched::exit_on("psched", st);
  psched::Dashboard dashboard(io, scheduler);
  if (psched::Status st = dashboard.start(config.dashboard_address); !st) return psched::exit_on("psched", st);
  if (psched::Status st = scheduler.publish(dashboard.url()); !st) return psched::exit_on("psched", st);

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
  boost::asio::signal_set hangups(io, SIGHUP);
  std::function<void()> await_hangup = [&] {
    hangups.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      reload_on_hangup(f, scheduler, dashboard);
      await_hangup();
    });
  };
  await_hangup();
  psched::run_spinning(io, std::chrono::microseconds(f.spin_us));
  spdlog::info("psched exited");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  CLI::App app{"psched: the scheduler daemon of a psched cluster. Workers (pcuda-worker) register "
               "here; clients (pbench, libpclient) submit array-sum jobs."};
  add_flags(app, flags);
  if (const std::optional<int> code = psched::cli::parse(app, argc, argv)) return *code;
  flags.max_connections_given = app.count("--max-connections") > 0;
  if (auto failed = complete(flags)) return *failed;
  return run(flags);
}
