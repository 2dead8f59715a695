// Scheduler: the psched daemon's state and behaviour on one Asio event loop (no locks). It accepts
// connections, admits workers and clients after Hello, turns Submit into a Job, keeps every worker's
// task window full (dispatch.cpp, as its Dispatcher plans), folds ResultBatches into jobs, streams Progress and the final
// result, and re-queues the chunks of workers that leave or die.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "net/connection.h"
#include "net/framing.h"
#include "net/loop_watchdog.h"
#include "scheduler/admission.h"
#include "scheduler/burn_board.h"
#include "scheduler/chunk_seconds_histogram.h"
#include "scheduler/dispatcher.h"
#include "scheduler/give_back.h"
#include "scheduler/job.h"
#include "scheduler/job_devices.h"
#include "scheduler/peers.h"
#include "scheduler/task_stream.h"
#include "scheduler/top_up.h"

namespace psched {

// Most chunk partials one Progress carries (88 bytes each on the wire plus 8 per exact term, at
// most kExactMaxTerms: under 1.8 MB, typically ~0.4 MB): more go out in further Progress messages,
// so no rate of completions can outgrow a frame (kDefaultMaxFrameBytes). A job holding this many
// sends them at once rather than at its next 50 ms tick, so psched holds at most about a frame of
// a job's partials (~600 bytes each in memory) beyond what its client's connection holds; and a
// frame is what a slow reader cut off keeps of a write begun (FramedConnection::cut_off).
inline constexpr size_t kMaxPartialsPerProgress = 4096;
// The heartbeat interval peers are told in Welcome: at most `preferred`, and at most a fifth of
// the worker timeout, so that a worker's heartbeat always arrives several times within the timeout
// (--worker-timeout 1 with a 1 s heartbeat made idle workers flap). At least 50 ms.
inline uint32_t heartbeat_ms_for(uint32_t worker_timeout_ms, uint32_t preferred) {
  const uint32_t fifth = worker_timeout_ms / 5;
  const uint32_t hb = preferred < fifth ? preferred : fifth;
  return hb < 50 ? 50 : hb;
}

struct SchedulerConfig {
  std::string host;                 // listen address; empty: all interfaces
  uint16_t port = 8786;             // 0: pick a free port
  std::string dashboard_address = ":8787";  // "none" disables the dashboard
  std::string scheduler_file;       // written once listening
  std::string token;                // required from every peer when not empty
  // TLS on every connection (mutual, tls.h) when set; the dashboard serves HTTPS with its
  // certificate. Null: plain TCP.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::shared_ptr<boost::asio::ssl::context> dashboard_tls;  // same certificate, no client's asked
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  uint32_t heartbeat_ms = 1000;         // at most: the Scheduler lowers it (heartbeat_ms_for)
  uint32_t worker_timeout_ms = 30000;     // a worker silent this long is dead
  // A worker holding work that reports no progress this long (or kStallFactor times what its
  // reports should take, if longer: scheduler/stall.h) has stalled; 0: never judged.
  uint32_t stall_timeout_ms = 10000;
  uint32_t client_timeout_ms = 60000;     // a client silent this long is gone
  uint32_t handshake_timeout_ms = 5000;   // Hello must arrive within this
  uint32_t allowed_failures = 3;
  // Workers and clients (after Hello): a fleet of thousands of GPUs and its clients, ~5 KB each
  // when idle (psched lowers it to what its file descriptor limit holds: main.cpp).
  uint32_t max_connections = 16384;
  AdmissionLimits admission;              // running jobs, one client's share, connections before Hello
  // What psched holds unsent for clients that do not read what it pushes (streamed partials,
  // Progress): one client at most max_client_unsent_bytes (two default frames) before it is cut
  // off, all together at most max_total_unsent_bytes, past which the one holding the most is cut
  // off (slow_readers.cpp). 16 clients that never read once took psched to 1.1 GB.
  size_t max_client_unsent_bytes = size_t{32} << 20;
  size_t max_total_unsent_bytes = size_t{256} << 20;
};

// Counters the dashboard and metrics read.
struct SchedulerCounters {
  uint64_t jobs_submitted = 0, jobs_completed = 0, jobs_failed = 0, jobs_cancelled = 0;
  uint64_t tasks_dispatched = 0, tasks_done = 0, tasks_requeued = 0, tasks_failed = 0;
  uint64_t tasks_given_back = 0;  // handed back unstarted from a job's tail (scheduler/give_back.h)
  uint64_t bytes_reduced = 0;
  uint64_t connections_refused = 0, protocol_errors = 0;
  uint64_t workers_stalled = 0;  // times a worker holding work stopped making progress (stalls.cpp)
  ChunkSecondsHistogram chunk_seconds;  // filled from ResultBatch busy seconds
  // Verify (scheduler/verify.h): chunks whose copies were compared, and suspect copies by worker
  // name (kept after a worker leaves: a Prometheus counter never goes back).
  uint64_t verify_chunks = 0;
  std::map<std::string, uint64_t> verify_mismatches;
};

// A finished job as the dashboard shows it: the job table forgets jobs once they end.
struct JobSummary {
  JobId id = 0;
  std::string client;
  std::shared_ptr<const JobSpec> spec;  // described (describe()) when shown, not when the job ends
  std::string state;    // done, failed or cancelled
  std::string message;  // why it failed or was cancelled
  uint64_t chunks = 0, chunks_done = 0, bytes = 0, count = 0, retries = 0;
  uint32_t workers = 0;
  double seconds = 0, sum = 0;  // sum: the result when done, the running sum otherwise
  // A var/std job's (JobSpec::squares) when done: var and std with ddof 0, numpy's default
  // (core/variance.h); a client may ask another ddof of the same exact sums.
  std::optional<double> var, std;
  std::chrono::system_clock::time_point finished = std::chrono::system_clock::now();
};

// How a worker went, which decides what the chunks it held are blamed with (docs/design.md,
// "Failures"): only what was shown counts against --allowed-failures.
enum class Loss {
  kLeft,       // on purpose (Goodbye), or set aside as stalled: its work runs elsewhere, unblamed
  kThrownOff,  // psched closed it for a protocol error: the peer misbehaved, not the chunks
  kLost,       // its connection dropped or timed out: the chunks are named; one it ran alone counts
};

class Scheduler {
 public:
  Scheduler(boost::asio::io_context& io, SchedulerConfig config);
  ~Scheduler();

  // Binds and listens; the loop must then be run by the caller.
  Status start();
  // Writes the scheduler file (when configured) naming our address and the dashboard's.
  Status publish(const std::string& dashboard_url);
  // Aborts running jobs ("scheduler shutting down"), says Goodbye to every peer, stops listening;
  // on_drained runs once every connection is closed.
  void shutdown(const std::string& reason, std::function<void()> on_drained);

  // SIGHUP: new connections from now on use these TLS contexts (null: keep plain TCP) and this
  // token; connections and jobs already running keep going. Checked whole by the caller first.
  void reload_credentials(std::shared_ptr<boost::asio::ssl::context> tls,
                          std::shared_ptr<boost::asio::ssl::context> dashboard_tls, std::string token);

  uint16_t port() const { return port_; }
  std::string address() const;

  const std::map<WorkerId, std::unique_ptr<WorkerRecord>>& workers() const { return workers_; }
  const JobTable& jobs() const { return jobs_; }
  const std::map<ClientId, std::unique_ptr<ClientRecord>>& clients() const { return clients_; }
  const std::deque<JobSummary>& recent_jobs() const { return recent_jobs_; }  // newest first
  const SchedulerCounters& counters() const { return counters_; }
  // Bytes psched's send buffers hold for clients, all together (--max-total-unsent bounds it).
  size_t client_unsent_bytes() const { return client_unsent_->bytes; }
  const LoopWatchdog& watchdog() const { return *watchdog_; }
  const TaskStream& task_stream() const { return task_stream_; }
  const JobDevices& job_devices() const { return job_devices_; }
  const BurnBoard& burns() const { return burns_; }
  double seconds_since_start() const;  // the task stream's clock
  const SchedulerConfig& config() const { return config_; }
  std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  struct Peer;  // per-connection state before and after Hello

  void accept();
  void on_message(const std::shared_ptr<Peer>& peer, wire::Message::Reader message);
  void on_close(const std::shared_ptr<Peer>& peer, const std::string& why);
  // After a burst of a peer's frames: a worker whose results came in it is topped up once.
  void on_frames_handled(const Peer& peer);
  // Hello: refused (said to the peer, connection closed) or admitted as a worker or a client.
  void on_hello(const std::shared_ptr<Peer>& peer, wire::Hello::Reader hello);
  // registration.cpp: a Hello refused, a worker or client admitted, what each may say after.
  bool refused_hello(FramedConnection& conn, wire::Hello::Reader hello);
  void admit_worker(const std::shared_ptr<FramedConnection>& conn, WorkerId id, const std::string& name,
                    wire::WorkerInfo::Reader info);
  void admit_client(const std::shared_ptr<FramedConnection>& conn, ClientId id, const std::string& name);
  void on_worker_message(WorkerRecord& worker, wire::Message::Reader message);
  void on_client_message(ClientRecord& client, wire::Message::Reader message);
  void send_cluster_info(ClientRecord& client, uint64_t tag);
  // A burn's state for the dashboard: kept, or refused with an Error (the connection stays open).
  void on_burn_status(ClientRecord& client, wire::BurnStatus::Reader burn);

  void on_submit(ClientRecord& client, wire::Submit::Reader submit);
  // results.cpp: a ResultBatch, checked whole (refused_result), then its partials and its
  // failures; apply_failures returns whether it re-queued any, nullopt when the job failed (and is
  // gone).
  void on_results(WorkerRecord& worker, wire::ResultBatch::Reader batch);
  // A ChunkFailure as read off the wire, its message made printable (at most 1000 bytes).
  struct ReportedFailure {
    uint64_t chunk = 0;
    std::string message;
  };
  // A ResultBatch's lists, read once: each read of a list checks its pointer again.
  struct Reported {
    capnp::List<wire::ChunkPartial>::Reader results;
    // Read whole before anything of the batch is applied: a malformed one throws there.
    std::vector<ReportedFailure> failures;
    double energy_joules = 0;  // finite and not negative
  };
  double observe_busy(WorkerRecord& worker, const Job& job, const Reported& batch, double reported_busy);
  void apply_partials(Job& job, WorkerRecord& worker, const Reported& batch, double busy_seconds);
  std::optional<bool> apply_failures(Job& job, WorkerRecord& worker, const Reported& batch);
  // A partial of `range` that cannot be true (refused_result), blamed on it as a failure; true
  // when a chunk reached --allowed-failures and the job failed (and is gone).
  bool blame_untrue(Job& job, WorkerRecord& worker, ChunkRange range, const std::string& why);

  // performance.cpp: what the scheduler records of how devices do (GPU health from heartbeats,
  // the task stream, each job's devices and stragglers) and the JobResult's report of it.
  void on_gpu_health(WorkerRecord& worker, wire::GpuHealth::Reader health);
  void observe_results(WorkerRecord& worker, const Job& job, uint64_t finished,
                       uint64_t first_chunk, double busy_seconds, double energy_joules);
  void report_devices(const Job& job, wire::JobResult::Builder result) const;

  // dispatch.cpp: fill every worker's window (or one worker's) from the queued chunks of all jobs,
  // as dispatcher_ plans (scheduler/dispatcher.h), and send what it plans.
  std::chrono::microseconds report_interval() const { return dispatcher_.report_interval(); }
  // Every top-up is planned before any is sent, so that each TaskBatch can say whether anything
  // is still queued (queueEmpty: then the worker need not report at half, net/report_pacer.h).
  void dispatch();
  // dispatch() at the end of this turn of the loop, once however many jobs arrive in it: clients
  // submitting 16 big jobs at once cost psched a round of the fleet per job (a TaskBatch to each
  // of 1024 workers, and each worker's window cut into a sliver of every job).
  void dispatch_soon();
  // sharing: how many workers share what each job has left (0: every worker); the worker takes at
  // most its part. Nothing queued: a job's tail may be split (a GiveBack).
  void dispatch_to(WorkerRecord& worker, uint64_t sharing = 0);
  // Tops up the workers that hold nothing (Dispatcher::idle): work they may take arrived, which the
  // busy ones take with their next top-up.
  void wake_idle();
  // stalls.cpp: at each heartbeat, a worker that holds work and made no progress for longer than
  // stall_bound() is stalled: its work runs elsewhere, unblamed, and its jobs' clients are told.
  void check_stalls();
  double stall_bound(const WorkerRecord& w) const;
  void stall_worker(WorkerRecord& w);
  void progress_from(WorkerRecord& w);  // a ResultBatch came from it
  void send_planned(const std::vector<Dispatcher::TopUp>& planned);
  void send_top_up(WorkerRecord& worker, const JobTopUp& top_up, bool queue_empty);
  void send_give_back(const Dispatcher::GiveBack& give_back);
  // The answer to a GiveBack (Dispatcher::GiveBack): its chunks go to the idle worker that asked.
  void on_given_back(WorkerRecord& worker, wire::ResultBatch::Reader batch);

  // job_verify.cpp: verify copies in and out of workers.
  // Whether a connected worker outside `excluded` exists (a verify copy's other worker).
  bool worker_outside(const std::vector<WorkerId>& excluded) const;
  // Verify's view of the workers (scheduler/verify.h), answered from workers_.
  // And the retry rule's (scheduler/top_up.h).
  struct Peers final : VerifyPeers, RetryPeers {
    explicit Peers(const Scheduler& s) : scheduler(s) {}
    bool someone_else(const std::vector<WorkerId>& excluded) const override;
    bool connected(WorkerId worker) const override;
    bool someone_not_named(const std::vector<std::string>& names) const override;
    const Scheduler& scheduler;
  };
  const Peers peers_{*this};
  VerifyCopy copy_of(const WorkerRecord& worker, const PartialSum& partial) const;
  // A piece of a verify copy came back from `worker`, or one of its chunks failed there.
  void on_verify_piece(Job& job, WorkerRecord& worker, ChunkRange range, const PartialSum& partial);
  uint32_t on_verify_failure(Job& job, WorkerRecord& worker, uint64_t chunk);
  // The copies settled a block: its chunks are done; a mismatch is logged and counted.
  void settle_block(Job& job, const VerifySettled& settled);
  // Worker `w` left or died: its verify copies go to others and searches that needed it end; the
  // job's failure message when a block's copies have now failed --allowed-failures times.
  std::optional<std::string> verify_worker_gone(Job& job, const WorkerRecord& w, const std::string& why, Loss loss);
  void write_verify_report(const Job& job, wire::JobResult::Builder out) const;

  void send_progress(Job& job, bool force);
  // Progress to every running job's client now: whether any worker is left to run it (Progress.
  // noWorkers), when the last one leaves, while none is there (each heartbeat) and when one joins.
  void tell_clients_about_workers();
  void complete_job(Job& job);
  void fail_job(Job& job, const std::string& message);
  void cancel_job(JobId id);
  void forget_job(Job& job);  // drops it from workers and the job table
  // The DropJobs a worker is owed (WorkerRecord::drops_owed), sent with its next message: a
  // TaskBatch (send_top_up) or at the latest the next heartbeat.
  void send_owed_drops(WorkerRecord& worker);
  // The job's line in the recent jobs (dashboard, /status); `total`: its result, when already made.
  void remember_job(const Job& job, const char* state, const std::string& message, const CompactPartial* total = nullptr);
  void remove_worker(WorkerId id, const std::string& why, Loss loss);
  // The chunks of `job` that worker `w` held go back to the queue (Loss says how they are blamed);
  // the job's failure message when a chunk has now failed --allowed-failures times.
  std::optional<std::string> requeue_lost(Job& job, const WorkerRecord& w, const std::string& why, Loss loss);
  void protocol_error(FramedConnection& conn, const std::string& message);
  // The same for a worker, named in the log line: its chunks go back to the queue as it leaves.
  void protocol_error(const WorkerRecord& worker, const std::string& message);
  void heartbeat();
  // Past --max-total-unsent (inside the send() that passed it): the clients holding the most unsent
  // are cut off until the rest fit.
  void cut_slowest_readers();

  boost::asio::io_context& io_;
  SchedulerConfig config_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer heartbeat_timer_;
  // Our own lateness: a peer's silence counts only while this loop runs (loop_watchdog.h), so a
  // stalled scheduler never drops its healthy workers on waking.
  std::shared_ptr<LoopWatchdog> watchdog_;
  uint16_t port_ = 0;
  bool shutting_down_ = false;
  bool dispatch_posted_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // what posted handlers hold weakly
  std::function<void()> on_drained_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();

  // The dispatch policy and its state: declared before the workers, whose windows take theirs back
  // from its count of elements in flight as they go.
  Dispatcher dispatcher_{workers_, jobs_, peers_, peers_,
                         [](const WorkerRecord& w) { return w.conn->is_open(); }};
  std::map<WorkerId, std::unique_ptr<WorkerRecord>> workers_;
  std::map<ClientId, std::unique_ptr<ClientRecord>> clients_;
  JobTable jobs_;
  // The workers each job was sent to (DefineJob), so finishing a job visits only them.
  std::unordered_map<JobId, std::vector<WorkerId>> defined_on_;
  uint32_t next_peer_id_ = 1;
  JobId next_job_id_ = 1;
  uint32_t connections_ = 0;
  // What every client's connection holds unsent (FramedConnection::count_unsent_into).
  std::shared_ptr<UnsentTotal> client_unsent_ = std::make_shared<UnsentTotal>();
  SchedulerCounters counters_;
  PendingConnections before_hello_;       // connections before Hello (admission.h)
  RateLimitedLog connection_refusals_, job_refusals_, tls_refusals_;
  std::deque<JobSummary> recent_jobs_;  // the last kRecentJobs finished jobs, newest first
  TaskStream task_stream_;
  JobDevices job_devices_;
  BurnBoard burns_;  // running burn-ins, per client connection (dashboard)
  std::set<JobId> want_timeline_;  // running jobs whose JobResult carries their task stream
  static constexpr size_t kRecentJobs = 20;
};

}  // namespace psched
