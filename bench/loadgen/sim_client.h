// Simulated clients on the loadgen's loop: each is a real client connection to psched that submits
// array-sum jobs (arange or constant, integer-valued, so the closed form gives the exact result
// bits) and checks every JobResult bit for bit against it. Burst mode submits every job at once;
// continuous mode keeps a number of jobs outstanding until a deadline. A connection that closes
// fails its outstanding jobs with the reason and, in continuous mode, reconnects.
#pragma once

#include <boost/asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/loadgen/sim_peer.h"
#include "core/job_spec.h"

namespace psched::loadgen {

struct ClientPlan {
  JobSpec base;                 // shape of every job; start, step and selection vary per job
  bool vary = true;             // vary jobs so no two clients' answers are the same
  uint32_t jobs_per_client = 1;  // burst mode: all submitted at once
  uint32_t outstanding = 1;      // continuous mode: jobs kept in flight per client
  std::chrono::steady_clock::time_point deadline{};  // continuous mode when set
  double verify = 0;             // Submit.verifyFraction of every job
};

struct ClientStats {
  uint64_t submitted = 0, ok = 0, failed = 0, mismatched = 0;
  std::vector<double> latency_s;                   // submit -> result, jobs that completed
  std::map<std::string, uint64_t> failure_counts;  // message -> how many
  std::vector<std::string> mismatches;             // what differed, one line each
  std::chrono::steady_clock::time_point first_submit{}, last_result{};
};

class ClientPool;

class SimClient : public SimPeer {
 public:
  SimClient(ClientPool& pool, uint32_t index);
  void heartbeat();
  bool finished() const { return finished_; }

 private:
  struct Pending {
    JobSpec spec;
    std::chrono::steady_clock::time_point submitted;
    uint64_t job_id = 0;  // 0 until accepted
  };
  void say_hello(wire::Message::Builder m) override;
  void on_message(wire::Message::Reader message) override;
  void on_close(const std::string& why) override;
  void submit_more();
  void submit(const JobSpec& spec);
  void fail(uint64_t tag, const std::string& message);
  void check_done();

  ClientPool& pool_;
  uint32_t index_;
  bool welcomed_ = false, finished_ = false;
  uint64_t next_tag_ = 1;
  uint32_t burst_left_ = 0;
  std::map<uint64_t, Pending> submitted_;       // tag -> job
  std::map<uint64_t, uint64_t> tag_of_job_;   // job id -> tag
};

class ClientPool {
 public:
  ClientPool(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint scheduler, ClientPlan plan);
  void start(uint32_t clients);
  void stop();
  bool finished() const { return finished_clients_ == clients_.size(); }
  size_t finished_clients() const { return finished_clients_; }  // from any thread

  ClientStats& stats() { return stats_; }
  const ClientPlan& plan() const { return plan_; }
  boost::asio::io_context& io() { return io_; }
  const boost::asio::ip::tcp::endpoint& scheduler() const { return scheduler_; }
  JobSpec next_job();  // the plan's shape, varied by a running job number
  bool continuous() const { return plan_.deadline != std::chrono::steady_clock::time_point{}; }
  void client_finished();
  std::function<void()> on_finished;

 private:
  void heartbeat_all();

  boost::asio::io_context& io_;
  boost::asio::ip::tcp::endpoint scheduler_;
  ClientPlan plan_;
  std::vector<std::shared_ptr<SimClient>> clients_;
  std::atomic<size_t> finished_clients_{0};
  uint64_t job_number_ = 0;
  boost::asio::steady_timer heartbeat_timer_;
  bool stopping_ = false;
  ClientStats stats_;
};

}  // namespace psched::loadgen
