// SchedulerLink: a peer's connection to the scheduler, opened the one way pcuda-worker, libpclient
// and psched-loadgen open it: ask where the scheduler is (at each attempt: a scheduler file may
// have been rewritten), resolve, connect, frame (TLS when the address says tls://), say Hello. A
// callback of an earlier attempt or connection reaches the owner never: each attempt has its
// generation, and connect() and stop() start a new one. Policy stays with the owner: when to try
// again (retry_after), when to give up, what Hello says.
#pragma once

#include <boost/asio.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "net/address.h"
#include "net/connection.h"

namespace psched {

// A retry's pause drawn from [pause / 2, pause] by `random` (any 64 bits): the peers that lost the
// scheduler together (it was restarted, or its network flapped) come back spread over half their
// pause, not all thousands of them in the same millisecond at each step of the same backoff.
std::chrono::milliseconds jittered(std::chrono::milliseconds pause, uint64_t random);

class SchedulerLink {
 public:
  struct Handlers {
    // Where to connect, asked at each attempt. An error ends the attempt (closed, was_open false).
    std::function<StatusOr<Address>()> where;
    // A connection is up (the TLS handshake may still be going on; what is sent meanwhile
    // queues): say Hello, set timeouts.
    std::function<void(FramedConnection&)> opened;
    std::function<void(wire::Message::Reader)> message;
    // The attempt failed (was_open false: "cannot connect to scheduler ADDRESS: why", or where()'s
    // error, whose code is kept) or the open connection closed (was_open true: why it closed).
    std::function<void(const Status& why, bool was_open)> closed;
  };

  // `tls` is used for tls:// addresses (a client's context: TlsRole::kClient).
  SchedulerLink(boost::asio::io_context& io, std::shared_ptr<boost::asio::ssl::context> tls,
                size_t max_frame_bytes, Handlers handlers);
  ~SchedulerLink();
  SchedulerLink(const SchedulerLink&) = delete;
  SchedulerLink& operator=(const SchedulerLink&) = delete;

  // Starts an attempt now (an earlier attempt or connection is forgotten, not closed).
  void connect();
  // Starts an attempt after `pause`, unless connect() or stop() comes first.
  void retry_after(std::chrono::milliseconds pause);
  // No callback and no attempt after this. The connection, if any, stays open for the owner to say
  // Goodbye on and close.
  void stop();

  // The last connection, open or closed (null before the first one is up): why it closed
  // (refused_by_tls) is asked of it after.
  const std::shared_ptr<FramedConnection>& conn() const { return conn_; }
  // The connection while it is open (null before the first one is up and once it closed): what
  // the owner sends on.
  FramedConnection* open_conn() const { return conn_ && conn_->is_open() ? conn_.get() : nullptr; }
  // The address of the last attempt (to name it in messages).
  const Address& address() const { return address_; }

 private:
  void on_connected(boost::asio::ip::tcp::socket socket, uint32_t generation);
  void failed(uint32_t generation, const Status& why);

  boost::asio::io_context& io_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  size_t max_frame_bytes_;
  Handlers handlers_;
  boost::asio::steady_timer retry_timer_;
  std::shared_ptr<FramedConnection> conn_;
  Address address_;
  uint32_t generation_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // callbacks hold it weakly
};

}  // namespace psched
