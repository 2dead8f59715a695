// Shared by the abuse tests: a real cluster with a real job running in the background while a test
// misbehaves on the scheduler's port (while_a_job_runs), and the checks that the job came through
// exact regardless.
#pragma once

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "net/address.h"
#include "raw_peer.h"
#include "support/job_helpers.h"
#include "support/test_cluster.h"

namespace psched::test {

inline uint16_t port_of(const TestCluster& cluster) { return parse_address(cluster.address())->port; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// eventually(): tests/support/test_cluster.h.

// A job of 400 arange chunks on its own client connection and thread. Workers started with
// kSlowChunks take ~10 ms a chunk, so it is still running while a test does its damage.
const std::map<std::string, std::string> kSlowChunks = {{"PSCHED_TEST_CHUNK_DELAY_MS", "10"}};

class BackgroundJob {
 public:
  static pclient::Job job() { return arange_job(2000, 2000, 100, 100, 1, 1); }
  static constexpr uint64_t kChunkElements = 100 * 100;  // every chunk's, all selected

  explicit BackgroundJob(TestCluster& cluster) : job_(job()), client_(cluster.client()) {
    thread_ = std::thread([this] {
      try {
        pclient::RunOptions options;
        options.on_progress = [this](const pclient::Progress& p) {
          if (p.chunks_done > 0) started_ = true;
        };
        result_ = client_.run(job_, options);
      } catch (const std::exception& e) {
        error_ = e.what();
      }
      finished_ = true;
    });
  }
  ~BackgroundJob() {
    if (thread_.joinable()) thread_.join();
  }

  // Readiness: the job has at least one chunk done.
  bool wait_started(int timeout_ms = 20000) {
    return eventually([&] { return started_.load() || finished_.load(); }, timeout_ms);
  }
  bool finished() const { return finished_; }
  // Waits for the end; "" when the result is exactly the closed form, else what went wrong.
  std::string outcome() {
    thread_.join();
    if (!error_.empty()) return "job failed: " + error_;
    return check(job_, result_);
  }

 private:
  pclient::Job job_;
  pclient::Client client_;
  pclient::Result result_;
  std::string error_;
  std::atomic<bool> started_{false}, finished_{false};
  std::thread thread_;
};

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A fake worker that said Hello and was handed chunks of the running job: its connection, the job
// and the first chunk it was given.
struct FakeWorker {
  std::unique_ptr<RawPeer> peer;
  uint64_t job_id = 0, assigned = 0;
};

inline FakeWorker fake_worker_with_work(TestCluster& cluster) {
  FakeWorker fake{std::make_unique<RawPeer>(port_of(cluster))};
  fake.peer->hello_as_worker(/*slots=*/1);
  REQUIRE(fake.peer->read_until(wire::Message::WELCOME));
  auto batch = fake.peer->read_until(wire::Message::TASK_BATCH);
  REQUIRE(batch);
  fake.job_id = batch->message().getTaskBatch().getJobId();
  REQUIRE(batch->message().getTaskBatch().getRanges().size() >= 1);
  fake.assigned = batch->message().getTaskBatch().getRanges()[0].getFirst();
  return fake;
}

// A cluster of one slow worker with a job running; `act` misbehaves; then the job must be exact
// and the scheduler still alive.
inline void while_a_job_runs(const std::function<void(TestCluster&)>& act,
                             const std::vector<std::string>& scheduler_args = {}) {
  TestCluster cluster({.extra_args = scheduler_args});
  cluster.add_worker({.threads = 1, .env = kSlowChunks});
  cluster.wait_for_workers(1);
  BackgroundJob job(cluster);
  REQUIRE(job.wait_started());
  act(cluster);
  CHECK(job.outcome() == "");
  CHECK(process_alive(cluster.scheduler_pid()));
}

}  // namespace psched::test
