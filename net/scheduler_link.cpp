#include "net/scheduler_link.h"

#include <fmt/format.h>

#include "core/check.h"

namespace psched {

namespace asio = boost::asio;
using asio::ip::tcp;

SchedulerLink::SchedulerLink(asio::io_context& io, std::shared_ptr<asio::ssl::context> tls,
                             size_t max_frame_bytes, Handlers handlers)
    : io_(io),
      tls_(std::move(tls)),
      max_frame_bytes_(max_frame_bytes),
      handlers_(std::move(handlers)),
      retry_timer_(io) {
  PSCHED_ASSERT(handlers_.where && handlers_.opened && handlers_.message && handlers_.closed);
}

SchedulerLink::~SchedulerLink() { stop(); }

void SchedulerLink::connect() {
  retry_timer_.cancel();
  const uint32_t generation = ++generation_;
  StatusOr<Address> where = handlers_.where();
  if (!where) {
    // Told on the next turn, as a failed connect would be: the owner may call connect() from
    // its handler without recursing.
    asio::post(io_, [this, alive = std::weak_ptr<bool>(alive_), generation, why = where.status()] {
      if (alive.lock()) failed(generation, why);
    });
    return;
  }
  address_ = *where;
  auto resolver = std::make_shared<tcp::resolver>(io_);
  auto socket = std::make_shared<tcp::socket>(io_);
  std::weak_ptr<bool> alive = alive_;
  resolver->async_resolve(
      address_.host, std::to_string(address_.port),
      [this, alive, resolver, socket, generation](const boost::system::error_code& ec,
                                                  tcp::resolver::results_type results) {
        if (!alive.lock() || generation != generation_) return;
        if (ec) {
          failed(generation, Status::error(fmt::format("cannot connect to scheduler {}: {}",
                                                       address_.to_string(), ec.message())));
          return;
        }
        asio::async_connect(*socket, results, [this, alive, socket, generation](
                                                  const boost::system::error_code& ec2, const tcp::endpoint&) {
          if (!alive.lock() || generation != generation_) return;
          if (ec2) {
            failed(generation, Status::error(fmt::format("cannot connect to scheduler {}: {}",
                                                         address_.to_string(), ec2.message())));
            return;
          }
          on_connected(std::move(*socket), generation);
        });
      });
}

void SchedulerLink::failed(uint32_t generation, const Status& why) {
  if (generation == generation_) handlers_.closed(why, /*was_open=*/false);
}

void SchedulerLink::on_connected(tcp::socket socket, uint32_t generation) {
  const bool tls = address_.scheme == Scheme::kTls;
  PSCHED_ASSERT(!tls || tls_, address_.to_string());  // scheduler_address() only says tls:// with TLS files
  conn_ = std::make_shared<FramedConnection>(std::move(socket), uint32_t(max_frame_bytes_),
                                             Transport{tls ? tls_ : nullptr, TlsRole::kClient});
  std::weak_ptr<bool> alive = alive_;
  conn_->start({[this, alive, generation](wire::Message::Reader m) {
                  if (alive.lock() && generation == generation_) handlers_.message(m);
                },
                [this, alive, generation](const std::string& why) {
                  if (alive.lock() && generation == generation_)
                    handlers_.closed(Status::error(why), /*was_open=*/true);
                }});
  handlers_.opened(*conn_);
}

std::chrono::milliseconds jittered(std::chrono::milliseconds pause, uint64_t random) {
  const auto half = pause.count() / 2;
  const auto spread = uint64_t(pause.count() - half) + 1;  // [half, pause], both ends included
  return std::chrono::milliseconds(half + int64_t(random % spread));
}

void SchedulerLink::retry_after(std::chrono::milliseconds pause) {
  const uint32_t generation = ++generation_;
  retry_timer_.expires_after(pause);
  retry_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_), generation](const boost::system::error_code& ec) {
    if (!ec && alive.lock() && generation == generation_) connect();
  });
}

void SchedulerLink::stop() {
  ++generation_;
  retry_timer_.cancel();
}

}  // namespace psched
