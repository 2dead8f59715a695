// libpclient's implementation: a FramedConnection on a private io_context that runs only while a
// call is waiting for its answer (one thread, no background work between calls).
#include "pclient/client.h"

#include "client/job_run.h"
#include "client/job_spec_of.h"

#include <boost/asio.hpp>
#include <capnp/message.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "core/job_spec.h"
#include "core/plural.h"
#include "core/worker_info.h"
#include "net/address.h"
#include "net/connection.h"
#include "net/event_loop.h"
#include "net/framing.h"
#include "net/scheduler_file.h"
#include "net/scheduler_link.h"
#include "net/tls.h"
#include "net/token.h"
#include "net/wire_convert.h"

namespace pclient {

namespace asio = boost::asio;

uint64_t Job::bytes() const {
  const psched::StatusOr<psched::DType> d = psched::parse_dtype(dtype);
  return rows * cols * psched::element_bytes(d ? *d : psched::DType::kFloat64);
}

uint64_t Job::chunks() const {
  if (chunk_rows == 0 || chunk_cols == 0) return 0;
  return psched::ChunkGrid{rows, cols, chunk_rows, chunk_cols}.chunks();
}

void validate(const Job& job) {
  if (psched::Status st = psched::validate(job_spec_of(job)); !st) throw Error(st.message());
}

// The scheduler connection went away (closed, reset, Goodbye) while a call waited.
class ConnectionLost : public Error {
 public:
  using Error::Error;
};

struct Client::Impl {
  ConnectOptions options;  // kept to connect again (reconnect_ms)
  asio::io_context io;
  std::unique_ptr<psched::SchedulerLink> link;  // the connection (open_session)
  asio::steady_timer heartbeat_timer{io};
  uint32_t heartbeat_ms = 1000;
  std::string closed_why;  // non-empty once the connection is gone
  // The message a call waits for: the handler sets `done` when it has what it needs.
  std::function<void(psched::wire::Message::Reader)> waiter;
  bool done = false;
  uint64_t next_tag = 1;
  std::chrono::microseconds spin{0};
  // Errors about unanswered messages psched refused (Error.refused), until take_refusals().
  static constexpr size_t kMaxRefusalsKept = 64;
  std::vector<std::string> refusals;

  psched::FramedConnection* conn() const { return link ? link->conn().get() : nullptr; }  // open or closed
  psched::FramedConnection* open_conn() const { return link ? link->open_conn() : nullptr; }

  void on_message(psched::wire::Message::Reader m) {
    if (m.which() == psched::wire::Message::HEARTBEAT) return;
    if (m.which() == psched::wire::Message::ERROR && m.getError().getRefused()) {  // not the waiter's business
      if (refusals.size() < kMaxRefusalsKept) refusals.push_back(m.getError().getMessage().cStr());
      return;
    }
    if (m.which() == psched::wire::Message::GOODBYE) {
      closed_why = fmt::format("scheduler closed the connection: {}", m.getGoodbye().getReason().cStr());
      // Let a waiting run() see JobFailed first if one came; otherwise this ends the wait.
    }
    if (waiter) waiter(m);
  }

  void heartbeat() {
    heartbeat_timer.expires_after(std::chrono::milliseconds(heartbeat_ms));
    heartbeat_timer.async_wait([this](const boost::system::error_code& ec) {
      if (ec || !open_conn()) return;
      psched::send_message(*open_conn(), [](psched::wire::Message::Builder m) { m.initHeartbeat(); });
      heartbeat();
    });
  }

  // Runs the loop until the waiter says done, the connection closes, or the deadline passes.
  void wait(int timeout_ms, const char* what) {
    done = false;
    std::optional<asio::steady_timer> deadline;
    bool timed_out = false;
    if (timeout_ms >= 0) {
      deadline.emplace(io, std::chrono::milliseconds(timeout_ms));
      deadline->async_wait([&](const boost::system::error_code& ec) {
        if (!ec) timed_out = true;
      });
    }
    heartbeat();
    io.restart();
    while (!done && closed_why.empty() && !timed_out) psched::run_one_spinning(io, spin);
    heartbeat_timer.cancel();
    if (deadline) deadline->cancel();
    io.restart();
    io.poll();  // let the cancelled handlers finish
    waiter = nullptr;
    if (done) return;
    if (timed_out) throw Error(fmt::format("timed out after {} ms waiting for {}", timeout_ms, what));
    throw ConnectionLost(closed_why);
  }

  void send(const std::function<void(psched::wire::Message::Builder)>& fill) {
    if (!open_conn()) throw Error(closed_why.empty() ? "not connected" : closed_why);
    psched::send_message(*open_conn(), fill);
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::Client(Client&&) noexcept = default;
Client& Client::operator=(Client&&) noexcept = default;
Client::~Client() {
  if (impl_) close();
}

namespace {

// A connected, welcomed session with the scheduler (Client::connect, and again after a lost
// connection when reconnect_ms allows).
std::unique_ptr<Client::Impl> open_session(const ConnectOptions& options);

}  // namespace

Client Client::connect(const ConnectOptions& options) { return Client(open_session(options)); }

namespace {

// Why open_session's wait for Welcome ended without one, in one line naming the address.
std::string why_not_welcomed(const Client::Impl& s, const psched::Address& address, int timeout_ms,
                             const Error& e) {
  if (!s.conn()) {  // never connected: refused, not resolved, or no answer
    if (!s.closed_why.empty()) return s.closed_why;
    return fmt::format("cannot connect to scheduler {}: no answer within {} ms", address.to_string(), timeout_ms);
  }
  if (s.conn()->refused_by_tls()) return fmt::format("scheduler {}: {}", address.to_string(), s.closed_why);
  // Silence or bytes that are not our protocol: most likely something else listens there.
  return fmt::format("scheduler {} did not accept us: {} (is a psched scheduler listening there?)",
                     address.to_string(), e.what());
}

// The session's link to the scheduler at `address`: Hello once connected, every message to the
// session, and why it closed kept for the call that waits.
std::unique_ptr<psched::SchedulerLink> link_for(Client::Impl& s, const psched::Address& address,
                                                std::shared_ptr<asio::ssl::context> tls) {
  std::string token = s.options.token;
  if (token.empty()) {  // PSCHED_TOKEN as the daemons read it: a trailing newline is not the token's
    psched::StatusOr<std::string> env = psched::load_token("");
    if (!env) throw Error(env.message());
    token = *env;
  }
  return std::make_unique<psched::SchedulerLink>(
      s.io, std::move(tls), psched::kDefaultMaxFrameBytes,
      psched::SchedulerLink::Handlers{
          [address] { return psched::StatusOr<psched::Address>(address); },
          [name = s.options.name, token](psched::FramedConnection& c) {
            psched::send_message(c, [&](psched::wire::Message::Builder m) {
              psched::init_hello(m, psched::wire::Role::CLIENT, name, token);
            });
          },
          [&s](psched::wire::Message::Reader m) { s.on_message(m); },
          [&s](const psched::Status& why, bool was_open) {
            if (!s.closed_why.empty()) return;
            s.closed_why = !was_open || s.conn()->refused_by_tls()
                               ? why.message()
                               : "connection to the scheduler lost: " + why.message();
          }});
}

std::unique_ptr<Client::Impl> open_session(const ConnectOptions& options) {
  if (options.name.size() > psched::kMaxPeerNameBytes)
    throw Error(fmt::format("client name is {} bytes long; at most {}", options.name.size(),
                            psched::kMaxPeerNameBytes));
  std::string address_text = options.address;
  if (address_text.empty()) {
    if (options.scheduler_file.empty()) throw Error("no scheduler address or scheduler file given");
    auto info = psched::wait_for_scheduler_file(options.scheduler_file, options.scheduler_file_timeout_ms);
    if (!info) throw Error(info.message());
    address_text = info->address;
  }
  const psched::TlsFiles tls_files{options.tls_ca_file, options.tls_cert_file, options.tls_key_file};
  auto address = psched::scheduler_address(address_text, tls_files.any());
  if (!address) throw Error(address.message());
  std::shared_ptr<asio::ssl::context> tls;
  if (address->scheme == psched::Scheme::kTls) {
    auto context = psched::make_tls_context(tls_files, psched::TlsRole::kClient);
    if (!context) throw Error(context.message());
    tls = *context;
  }

  auto impl = std::make_unique<Client::Impl>();
  Client::Impl& s = *impl;
  s.options = options;
  s.spin = options.spin_us < 0 ? psched::kDefaultSpin : std::chrono::microseconds(options.spin_us);
  s.link = link_for(s, *address, std::move(tls));
  std::string refused;
  s.waiter = [&](psched::wire::Message::Reader m) {
    if (m.which() == psched::wire::Message::WELCOME) {
      s.heartbeat_ms = std::max<uint32_t>(100, m.getWelcome().getHeartbeatMs());
      s.done = true;
    } else if (m.which() == psched::wire::Message::ERROR) {
      refused = m.getError().getMessage().cStr();
      s.done = true;
    }
  };
  s.link->connect();
  try {
    s.wait(options.connect_timeout_ms, "the scheduler's Welcome");
  } catch (const Error& e) {
    throw Error(why_not_welcomed(s, *address, options.connect_timeout_ms, e));
  }
  if (!refused.empty()) throw Error(fmt::format("scheduler {} refused us: {}", address->to_string(), refused));
  return impl;
}

}  // namespace

std::vector<WorkerInfo> Client::workers() {
  Impl& s = *impl_;
  const uint64_t tag = s.next_tag++;
  s.send([&](psched::wire::Message::Builder m) { m.initClusterInfoRequest().setTag(tag); });
  std::vector<WorkerInfo> out;
  s.waiter = [&](psched::wire::Message::Reader m) {
    if (m.which() != psched::wire::Message::CLUSTER_INFO) return;
    auto info = m.getClusterInfo();
    if (info.getTag() != tag) return;
    for (auto w : info.getWorkers()) psched::read_worker_info(w, out.emplace_back());
    s.done = true;
  };
  s.wait(30000, "cluster information");
  return out;
}

std::vector<WorkerInfo> Client::wait_for_workers(size_t n, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto list = workers();
    if (list.size() >= n) return list;
    if (std::chrono::steady_clock::now() >= deadline)
      throw Error(fmt::format("only {} of {} registered within {} ms", list.size(), psched::counted(n, "worker"),
                              timeout_ms));
    // Readiness check, not synchronisation: ask again shortly.
    asio::steady_timer pause(impl_->io, std::chrono::milliseconds(20));
    pause.wait();
  }
}

Result Client::run(const Job& job, const RunOptions& options) {
  const psched::JobSpec spec = job_spec_of(job);
  if (psched::Status st = psched::validate(spec); !st) throw Error(st.message());
  if (psched::Status st = psched::validate_verify_fraction(options.verify); !st)
    throw Error(st.message());
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t resubmissions = 0;; ++resubmissions) {
    try {
      Result result = run_once(job, options);
      result.resubmissions = resubmissions;
      result.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return result;
    } catch (const ConnectionLost& lost) {
      if (impl_->options.reconnect_ms <= 0) throw;
      reconnect(lost.what(), options);
    }
  }
}

void Client::reconnect(const std::string& lost, const RunOptions& options) {
  const ConnectOptions connect_options = impl_->options;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(connect_options.reconnect_ms);
  // Until a new session is open, this client is an unconnected one that says why.
  close();
  impl_ = std::make_unique<Impl>();
  impl_->options = connect_options;
  impl_->closed_why = lost;
  std::string last = lost;
  for (;;) {
    if (options.should_cancel && options.should_cancel())
      throw Cancelled(fmt::format("cancelled while reconnecting ({})", lost));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw Error(fmt::format("{}; no scheduler to resubmit the job to within {} ms (last: {})", lost,
                              connect_options.reconnect_ms, last));
    ConnectOptions attempt = connect_options;
    attempt.connect_timeout_ms = int(std::min<int64_t>(left.count(), connect_options.connect_timeout_ms));
    attempt.scheduler_file_timeout_ms = attempt.connect_timeout_ms;
    try {
      impl_ = open_session(attempt);
      impl_->options = connect_options;
      return;
    } catch (const Error& e) {
      last = e.what();
    }
    // The scheduler is not back yet: nothing can signal its return, so try again shortly.
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(100, std::max<int64_t>(1, left.count()))));
  }
}

namespace {

void submit(Client::Impl& s, uint64_t tag, const psched::JobSpec& spec, const RunOptions& options) {
  s.send([&](psched::wire::Message::Builder m) {
    auto submit = m.initSubmit();
    submit.setTag(tag);
    psched::to_wire(spec, submit.initSpec());
    submit.setWantPartials(options.want_partials);
    submit.setVerifyFraction(options.verify);
    submit.setWantTimeline(options.want_timeline);
  });
}

// What run() returns or throws once the job's run has ended.
Result outcome(const JobRun& run, const Client::Impl& s) {
  switch (run.state()) {
    case JobRun::State::kDone:
      return run.result();
    case JobRun::State::kCancelled:
      throw Cancelled(fmt::format("job {} cancelled", run.job_id()));
    default:
      // A job failed because the scheduler is going away (it says Goodbye after failing its jobs)
      // is a lost connection, not a property of the job: with reconnect_ms it is submitted again.
      if (!s.closed_why.empty() && s.options.reconnect_ms > 0) throw ConnectionLost(s.closed_why);
      throw Error(run.failure());
  }
}

}  // namespace

Result Client::run_once(const Job& job, const RunOptions& options) {
  Impl& s = *impl_;
  const uint64_t tag = s.next_tag++;
  submit(s, tag, job_spec_of(job), options);
  // The job's states (job_run.h); this loop feeds it the scheduler's messages, the caller's cancel
  // (polled every cancel_poll_ms) and the no-workers timeout.
  asio::steady_timer cancel_poll(s.io), no_workers(s.io);
  JobRun run(
      tag, options, [&](const JobRun::Fill& fill) { s.send(fill); },
      [&](bool start) {
        if (!start) {
          no_workers.cancel();
          return;
        }
        no_workers.expires_after(std::chrono::milliseconds(options.no_workers_timeout_ms));
        no_workers.async_wait([&](const boost::system::error_code& ec) {
          if (!ec) run.no_workers_timeout();
          s.done = s.done || run.finished();
        });
      });
  std::function<void()> poll_cancel = [&] {
    cancel_poll.expires_after(std::chrono::milliseconds(std::max(1, options.cancel_poll_ms)));
    cancel_poll.async_wait([&](const boost::system::error_code& ec) {
      if (ec || run.finished()) return;
      if (!options.should_cancel()) return poll_cancel();
      run.cancel();
      s.done = run.finished();
    });
  };
  if (options.should_cancel) poll_cancel();
  s.waiter = [&](psched::wire::Message::Reader m) {
    run.on_message(m);
    s.done = run.finished();
  };
  auto stop_timers = [&] {
    cancel_poll.cancel();
    no_workers.cancel();
    s.io.restart();
    s.io.poll();  // the cancelled handlers run now, while what they refer to still exists
  };
  try {
    s.wait(-1, "the job's result");
  } catch (...) {
    stop_timers();
    throw;
  }
  stop_timers();
  return outcome(run, s);
}

void Client::report_burn(const BurnStatus& burn) {
  Impl& s = *impl_;
  s.send([&](psched::wire::Message::Builder m) { psched::write_burn_status(burn, m.initBurnStatus()); });
  s.io.restart();  // write what did not fit the socket's buffer now, not at the next wait
  s.io.poll();
}

std::vector<std::string> Client::take_refusals() {
  Impl& s = *impl_;
  s.io.restart();  // what has arrived by now
  s.io.poll();
  return std::exchange(s.refusals, {});
}

void Client::close() {
  if (!impl_ || !impl_->link) return;
  Impl& s = *impl_;
  s.link->stop();
  if (psched::FramedConnection* c = s.open_conn()) {
    c->close("client closed");
    s.io.restart();
    s.io.poll();
  }
  s.link.reset();
}

}  // namespace pclient
