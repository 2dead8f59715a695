// SimPeer: what a simulated worker and a simulated client share: one connection to psched through
// the SchedulerLink every peer uses (net/scheduler_link.h: opened, said Hello on, retried after a
// pause; a late callback of an old connection, before a reconnect or a kill, changes nothing), left
// with Goodbye or dropped as a killed process's socket.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "net/connection.h"
#include "net/scheduler_link.h"

namespace psched::loadgen {

class SimPeer : public std::enable_shared_from_this<SimPeer> {
 public:
  SimPeer(boost::asio::io_context& io, boost::asio::ip::tcp::endpoint scheduler);
  virtual ~SimPeer() = default;

  void connect();
  // Goodbye, then close; no reconnection afterwards.
  void leave(const std::string& reason);
  // Closes without a word, as a killed process's socket; no reconnection afterwards.
  void drop();

 protected:
  virtual void say_hello(wire::Message::Builder m) = 0;  // init_hello (net/wire_convert.h) and more
  virtual void on_message(wire::Message::Reader message) = 0;
  virtual void on_close(const std::string& why) = 0;  // the connection (or the attempt) ended
  void reconnect_after(std::chrono::milliseconds pause);
  // A message this simulated peer has no case for: psched speaks something the simulator does not
  // (the protocol grew and bench/loadgen did not follow), so dropping it would make the figures
  // silently wrong. Says so on stderr, naming `peer` and the message, and ends the run (exit 1).
  [[noreturn]] static void unknown_message(const std::string& peer, wire::Message::Reader message);
  bool stopped() const { return stopped_; }
  // The connection while it is open (null before the first and after one closed).
  FramedConnection* conn() const { return link_.open_conn(); }

 private:
  SchedulerLink link_;
  bool stopped_ = false;
};

}  // namespace psched::loadgen
