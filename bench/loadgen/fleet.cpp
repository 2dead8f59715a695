// The simulated fleet (sim_worker.h): opening its workers a wave at a time, killing and replacing
// them, their heartbeats, and stopping them. Each worker's device and protocol are sim_worker.cpp.
#include <algorithm>
#include <random>

#include "bench/loadgen/sim_worker.h"

namespace psched::loadgen {

namespace asio = boost::asio;

Fleet::Fleet(asio::io_context& io, asio::ip::tcp::endpoint scheduler, DeviceModel device,
             std::string name_prefix, uint32_t first_index, uint32_t index_step)
    : io_(io),
      scheduler_(std::move(scheduler)),
      device_(device),
      name_prefix_(std::move(name_prefix)),
      next_index_(first_index),
      index_step_(index_step),
      heartbeat_timer_(io) {}

void Fleet::start(uint32_t count) {
  to_open_ += count;
  open_more();
  if (!heartbeat_running_) {
    heartbeat_running_ = true;
    heartbeat_all();
  }
}

void Fleet::open_more() {
  // The fleets on the loadgen's loops (index_step_ of them) share the wave: psched holds at most 256
  // connections that have not said Hello (--max-pending-connections) and refuses more.
  const uint32_t wave = std::max<uint32_t>(1, kConnectWave / index_step_);
  while (to_open_ > 0 && handshaking_ < wave && !stopping_) {
    --to_open_;
    ++handshaking_;
    auto w = std::make_shared<SimWorker>(*this, next_index_);
    next_index_ += index_step_;
    workers_.push_back(w);
    w->connect();
  }
}

void Fleet::handshake_done() {
  if (handshaking_ > 0) --handshaking_;
  open_more();
}

bool Fleet::churn_one() {
  std::vector<size_t> live;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i]->registered()) live.push_back(i);
  if (live.empty()) return false;
  const size_t victim = live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(random_)];
  workers_[victim]->kill();
  ++counters_.kills;
  respawn(workers_[victim]);
  return true;
}

void Fleet::replace(const SimWorker* dead) {
  for (auto& w : workers_)
    if (w.get() == dead) return respawn(w);
}

void Fleet::respawn(std::shared_ptr<SimWorker>& slot) {
  slot = std::make_shared<SimWorker>(*this, next_index_);
  next_index_ += index_step_;
  slot->connect();
}

void Fleet::heartbeat_all() {
  if (stopping_) return;
  for (auto& w : workers_) w->heartbeat();
  arm_heartbeat();
}

void Fleet::arm_heartbeat() {
  heartbeat_timer_.expires_after(std::chrono::milliseconds(heartbeat_ms_));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) heartbeat_all();
  });
}

void Fleet::set_heartbeat_ms(uint32_t ms) {
  if (ms == 0 || ms >= heartbeat_ms_) return;
  // Shorter than the interval we started with (a short --worker-timeout): the wait under way
  // could outlast the scheduler's patience, so start the new interval now.
  heartbeat_ms_ = ms;
  if (heartbeat_running_ && !stopping_) arm_heartbeat();
}

void Fleet::stop() {
  stopping_ = true;
  heartbeat_timer_.cancel();
  for (auto& w : workers_) w->leave();
}

}  // namespace psched::loadgen
