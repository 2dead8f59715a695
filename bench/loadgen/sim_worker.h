// A fleet of simulated GPU workers on one Asio loop: each is a real worker connection to psched
// (Hello with a GPU-like device, slots 8 and no element window, as pcuda-worker's CUDA backend
// announces) whose "device" runs its chunks one after another at a set time per element, by a
// timer per worker, and answers each with the exact partial from the closed form
// (expected_chunk_partial: the bits a real worker reports). The fleet can also kill workers
// abruptly (the connection reset, as after kill -9) and start replacements.
#pragma once

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/loadgen/sim_peer.h"
#include "core/job_spec.h"
#include "core/partial.h"
#include "net/report_pacer.h"
#include "worker/backend.h"
#include "worker/run_queue.h"

namespace psched::loadgen {

struct DeviceModel {
  double seconds_per_element = 0.67e-3 / 1e8;  // the H100's 0.67 ms per 10000 x 10000 chunk
  // Host time per chunk besides the device's (a real GPU worker's launch share, its partial read
  // back and reported): it takes time but is not reported as busy time, which is the device's.
  double seconds_per_chunk = 0;
  uint32_t slots = 8;                          // pcuda-worker: --streams 6 + 2
  uint64_t window_elements = 0;                // Hello windowElements
  // Report once this many chunks are done (or the queue ran dry): 0, one batch of the job's chunks
  // as pcuda-worker's CUDA backend computes them (worker/cuda/batching.h); 1, each as it finishes.
  uint32_t result_batch = 0;
  int64_t corrupt_chunk = -1;  // test-only: answer this chunk of every job with sum + 1
  // Test-only: a worker handed this chunk (of any job) dies at once, taking its window along, and
  // another takes its place, like a supervised pcuda-worker crashing on a poison chunk.
  int64_t crash_chunk = -1;
};

// Written by the fleet's loop, read by the loadgen's main thread (loadgen.cpp: a fleet per thread).
struct FleetCounters {
  std::atomic<uint64_t> welcomed{0};        // Welcome received (registrations, reconnections included)
  std::atomic<uint64_t> connected_now{0};   // workers registered at this moment
  std::atomic<uint64_t> refused{0};         // workers psched refused at Hello (an Error before Welcome)
  std::atomic<uint64_t> chunks_done{0};
  std::atomic<uint64_t> chunks_refused{0};  // jobs without a closed form: reported as chunk failures
  std::atomic<uint64_t> kills{0};
  std::atomic<uint64_t> disconnects{0};     // connections the scheduler or the network ended
  std::atomic<double> busy_seconds{0};      // simulated device time of the chunks done
  // Where the devices sat idle, for the loss breakdown (seconds on the steady clock): over the
  // workers that got work, the sums of their first start and of their last end, and the gaps
  // between (their queue dry while they were connected).
  std::atomic<uint64_t> started{0};
  std::atomic<uint64_t> busy_now{0};  // workers whose queue holds work at this moment
  std::atomic<double> first_start_sum{0}, last_end_sum{0}, gap_seconds{0};
};

class Fleet;

class SimWorker : public SimPeer {
 public:
  SimWorker(Fleet& fleet, uint32_t index);
  void kill();  // abrupt: the socket is closed with nothing said, like a process killed
  void leave();  // Goodbye, then close
  void heartbeat();
  bool registered() const { return registered_; }

 private:
  using Run = QueuedRun<NoSpec>;  // the specs are per job, in jobs_
  struct JobEntry {
    std::shared_ptr<const JobSpec> spec;  // null: the spec was invalid
    uint64_t partial_block = 0;           // DefineJob.partialBlock: where partials are cut
    // constant(v): a chunk's partial depends only on how many elements it selects, so each count's
    // partial is computed once (the closed form per chunk was the loadgen's largest cost).
    std::map<uint64_t, std::optional<CompactPartial>> constant_partials;
    // Every chunk the same size (the grid divides the array) and reported in runs (no chunk
    // partials asked for): runs are simulated in bulk, chunk_seconds each, their partial from the
    // closed form of the run (expected_run_compact).
    bool uniform = false;
    double chunk_seconds = 0;       // a chunk's time, the host's share included
    double chunk_busy_seconds = 0;  // of which the device's: what is reported as busy
  };
  struct Ready {  // finished chunks of one job, not yet reported
    uint64_t job_id;
    std::vector<ChunkOutcome> outcomes;  // as a real worker keeps them (and reports them)
  };

  void say_hello(wire::Message::Builder m) override;
  void on_message(wire::Message::Reader message) override;
  void on_close(const std::string& why) override;
  void on_task_batch(wire::TaskBatch::Reader batch);
  void on_give_back(wire::GiveBack::Reader give_back);
  double chunk_seconds(const Run& run) const;       // the time its next chunk takes
  double chunk_busy_seconds(const Run& run) const;  // of which the device's
  void arm();
  // The partial a real worker reports for `chunk` (nullopt: no exact closed form).
  std::optional<CompactPartial> chunk_partial(JobEntry& job, uint64_t chunk);
  // Whether the rest of `run` is chunks of one size simulated in bulk (JobEntry::uniform), and
  // their entry.
  const JobEntry* uniform(const Run& run) const;
  // The outcome of the chunks of `run` from its next one done `behind` seconds after it (at least
  // one; in bulk when uniform); returns the device seconds from the first one's end to the last's.
  double finish_chunks(const Run& run, double behind, ChunkOutcome& o);
  void on_device_tick();
  void reset_device();
  void report();
  uint64_t result_batch_for(uint64_t job_id) const;
  // After the queue changed: the device went idle at `at` (the queue ran dry) or busy again.
  void note_queue(std::chrono::steady_clock::time_point at);

  Fleet& fleet_;
  uint32_t index_;
  boost::asio::steady_timer device_timer_;
  bool registered_ = false;
  std::map<uint64_t, JobEntry> jobs_;
  RunQueue<NoSpec> queue_;  // as pcuda-worker's CUDA backend queues (worker/run_queue.h)
  std::vector<Ready> ready_;
  uint64_t ready_chunks_ = 0;
  ReportPacer pacer_;  // when ready chunks are reported, as pcuda-worker does (net/report_pacer.h)
  std::chrono::steady_clock::time_point head_done_at_{};
  bool device_idle_ = true, device_started_ = false;
  std::chrono::steady_clock::time_point idle_since_{};
};

class Fleet {
 public:
  // Workers are named name_prefix-N, N from first_index in steps of index_step (fleets on several
  // loops interleave their numbers, so every name is unique).
  Fleet(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint scheduler, DeviceModel device,
        std::string name_prefix, uint32_t first_index = 0, uint32_t index_step = 1);

  // Opens `count` workers, at most kConnectWave handshakes at a time over all the loadgen's fleets
  // (a burst of thousands of SYNs overflows the listen backlog and costs retransmission seconds,
  // and psched refuses a 257th connection waiting to say Hello).
  void start(uint32_t count);
  // Kills a random registered worker and starts a replacement; false when none is registered.
  bool churn_one();
  void replace(const SimWorker* dead);  // `dead` was killed: another takes its place
  void stop();  // every worker says Goodbye and closes

  FleetCounters& counters() { return counters_; }
  const DeviceModel& device() const { return device_; }
  boost::asio::io_context& io() { return io_; }
  const boost::asio::ip::tcp::endpoint& scheduler() const { return scheduler_; }
  const std::string& name_prefix() const { return name_prefix_; }
  bool stopping() const { return stopping_; }

  // Called by workers.
  void handshake_done();
  uint32_t heartbeat_ms() const { return heartbeat_ms_; }
  void set_heartbeat_ms(uint32_t ms);  // Welcome's figure: the next heartbeat goes out within it

  static constexpr uint32_t kConnectWave = 256;

 private:
  void open_more();
  void respawn(std::shared_ptr<SimWorker>& slot);  // a new worker in a dead one's place
  void heartbeat_all();
  void arm_heartbeat();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::endpoint scheduler_;
  DeviceModel device_;
  std::string name_prefix_;
  std::vector<std::shared_ptr<SimWorker>> workers_;
  uint32_t to_open_ = 0, handshaking_ = 0, next_index_ = 0, index_step_ = 1;
  uint32_t heartbeat_ms_ = 1000;
  boost::asio::steady_timer heartbeat_timer_;
  bool heartbeat_running_ = false;
  bool stopping_ = false;
  std::mt19937 random_{12345};
  FleetCounters counters_;
};

}  // namespace psched::loadgen
