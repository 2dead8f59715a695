// Worker: one pcuda-worker process's link to the scheduler. It connects (reconnecting with backoff),
// introduces its backend in Hello, feeds the chunks of TaskBatches to the backend, and sends the
// outcomes back in ResultBatches: every outcome that arrives while the loop is busy goes out in the
// same batch. With --death-timeout it exits when no scheduler is reachable for that long.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "app/exit_codes.h"
#include "net/connection.h"
#include "net/framing.h"
#include "net/report_pacer.h"
#include "net/scheduler_link.h"
#include "worker/backend.h"
#include "worker/energy_meter.h"
#include "worker/nvml.h"

namespace psched {

struct WorkerConfig {
  std::string scheduler_address;  // tcp://host:port, host:port or host
  std::string scheduler_file;     // used when no address is given: wait for it, then read it
  std::string name;
  std::string token;
  // TLS settings checked at start (tls.h): addresses without a scheme use TLS when set; tls://
  // needs them. Null: plain TCP only.
  std::shared_ptr<boost::asio::ssl::context> tls;
  uint32_t death_timeout_s = 0;   // 0: never give up
  uint32_t heartbeat_ms = 1000;
  uint32_t scheduler_timeout_ms = 30000;  // scheduler silent this long: reconnect
  uint32_t max_frame_bytes = kDefaultMaxFrameBytes;
  uint32_t scheduler_max_frame_bytes = kDefaultMaxFrameBytes;  // what the scheduler accepts (from Welcome)
  int64_t crash_on_chunk = -1;    // test-only fault switch (PSCHED_TEST_CRASH_ON_CHUNK)
  // Test-only fault switch (PSCHED_TEST_FLIP_CHUNK): this chunk's partial sum (of every job) goes
  // back with its last bit flipped, a device that silently computes wrong, for verify's tests.
  int64_t flip_chunk = -1;
  // Test-only fault switch (PSCHED_TEST_FLIP_SQUARES_CHUNK): the same for this chunk's sum of squares
  // (a var/std job's) alone, its sum untouched, so verify must name a difference in the squares.
  int64_t flip_squares_chunk = -1;
  // Test-only fault switch (PSCHED_TEST_LIE_FROM_CHUNK): the partials of this chunk and every later
  // one (of every job) go back counting one element more than their chunk has, a peer that lies
  // (0: about every chunk), for the partial check's tests.
  int64_t lie_from_chunk = -1;
  std::string cpu_affinity;       // CPUs this process is pinned to, as announced ("": not pinned)
};

class Worker {
 public:
  Worker(boost::asio::io_context& io, WorkerConfig config, std::unique_ptr<Backend> backend);
  ~Worker();

  // Heartbeats carry this GPU's health from now on (call before start()).
  void watch_gpu(std::unique_ptr<NvmlSampler> sampler) { gpu_ = std::move(sampler); }
  void start();
  // Tells the scheduler we are leaving (it re-queues our chunks at once), then stops; on_left runs
  // once the goodbye is written (or at once when not connected).
  void leave(const std::string& reason, std::function<void()> on_left);
  // Exit status the process should return once the loop ends.
  int exit_code() const { return exit_code_; }
  // The exit code after a sticky device error (supervisors restart the worker).

 private:
  StatusOr<Address> where() const;
  void on_link_closed(const Status& why, bool was_open);  // an attempt failed, or the link closed
  void schedule_reconnect();
  void on_connected(FramedConnection& conn);  // says Hello
  FramedConnection* conn() const { return scheduler_.conn().get(); }
  void on_message(wire::Message::Reader message);
  void on_disconnected(const std::string& why);
  void on_welcome(wire::Welcome::Reader welcome);
  void on_define_job(wire::DefineJob::Reader define);
  void on_drop_job(uint64_t job_id);
  void on_give_back(wire::GiveBack::Reader give_back);
  void on_task_batch(wire::TaskBatch::Reader batch);
  void drain_inbox();                     // on the loop: the outcomes backend threads left
  // On the loop: n outcomes in a row of one local job key (a launch's, as the inbox holds them),
  // looked up and queued once; a device_lost outcome comes alone. `now`: when the inbox was
  // drained (one clock read for a launch's thousands of outcomes). Moves from them.
  void on_outcomes(ChunkOutcome* outcomes, size_t n, std::chrono::steady_clock::time_point now);
  // n outcomes of one job, job_id the scheduler's: released from what it holds, queued for the
  // next report. Moves from them.
  void add_pending(ChunkOutcome* outcomes, size_t n, std::chrono::steady_clock::time_point now);
  void misbehave(ChunkOutcome& outcome) const;  // --flip-chunk, --flip-squares-chunk, --lie-from-chunk
  void flush_results();
  void assign(uint64_t job_id, uint64_t chunks);  // chunks of a TaskBatch now held
  void release(uint64_t job_id, uint64_t chunks);  // held chunks reported or given back
  void arm_report_timer();  // held results go at the pacer's deadline
  void lose_device(ChunkOutcome outcome);
  void heartbeat();
  // Leaves for good and stops the loop; run() returns `code` (a failure: the code its kind calls for).
  void give_up(const std::string& why, int code);
  void give_up(const Status& failure);

  // The worker's link to the scheduler: no scheduler (connecting or waiting to retry), connected
  // with Hello sent, welcomed (registered: chunks come and heartbeats go), leaving (for good: it
  // said goodbye or gave up). transition() is the only place that changes it, and checks the move
  // is legal (PSCHED_ASSERT); leaving is final.
  enum class Link : uint8_t { kDisconnected, kConnected, kWelcomed, kLeaving };
  void transition(Link to);

  boost::asio::io_context& io_;
  WorkerConfig config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<NvmlSampler> gpu_;  // null: no NVML (CPU backend, no driver library)
  EnergyMeter energy_;                // what each report charges for energy (with gpu_)
  DeviceInfo device_;
  // Silence from the scheduler counts only while this loop runs (a stopped worker that wakes
  // reads the scheduler's heartbeats before it judges it gone).
  std::shared_ptr<LoopWatchdog> watchdog_;
  SchedulerLink scheduler_;  // the connection; which outcomes belong to it is job_of_key_'s
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer report_timer_;  // sends held results at the pacer's deadline
  std::chrono::milliseconds backoff_{100};
  std::mt19937_64 jitter_{std::random_device{}()};  // spreads the retries of a fleet (jittered())
  std::chrono::steady_clock::time_point disconnected_since_;
  Link link_ = Link::kDisconnected;
  bool flush_posted_ = false;        // a flush_results() is posted: outcomes ride along with it
  bool report_timer_armed_ = false;
  ReportPacer pacer_;                        // when results go (net/report_pacer.h)
  std::map<uint64_t, uint64_t> held_by_job_;  // scheduler job id -> chunks enqueued, not reported
  bool warned_unreachable_ = false;  // "unreachable" was logged once for this stretch away
  int exit_code_ = 0;
  // The backend sees local job keys, never the scheduler's job ids: ids restart at 1 when the
  // scheduler restarts, and an outcome computed for the old scheduler must not be mistaken for one
  // of the new scheduler's job of the same number. Keys are never reused.
  struct JobEntry {
    uint64_t local_key = 0;
    std::shared_ptr<const JobSpec> spec;  // null: the scheduler sent an invalid spec
    uint64_t partial_block = 0;           // DefineJob.partialBlock: where partials are cut
  };
  std::map<uint64_t, JobEntry> jobs_;                 // scheduler job id -> entry
  std::map<uint64_t, uint64_t> job_of_key_;           // local key -> scheduler job id
  uint64_t next_local_key_ = 1;
  std::map<uint64_t, std::vector<ChunkOutcome>> unsent_outcomes_;  // scheduler job id -> outcomes to send
  // An emptied outcome list kept for the next job's unsent_outcomes_ entry: an outcome is ~650 bytes (its
  // exact sum), and a fresh list each flush cost more in allocation and page faults than the
  // chunks of a small-chunk job themselves.
  std::vector<ChunkOutcome> spare_outcomes_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Outcomes from backend threads wait here for the loop; one post drains all that came meanwhile.
  std::mutex inbox_mutex_;
  std::vector<ChunkOutcome> inbox_, draining_;
  bool inbox_posted_ = false;
};

}  // namespace psched
