// The dashboard's HTTP server: one acceptor and one HttpSession per connection, all on the
// scheduler's loop. Every request is bounded (8 KiB of headers, 4 KiB of body, 10 s to arrive and
// 10 s to be written) and at most kMaxSessions connections are kept: the oldest goes when a new
// one arrives, so idle or slow clients can neither starve the page nor hurt the scheduler. With TLS
// on the sessions speak HTTPS (the scheduler's certificate), and DashboardAuth gates every request.
#include "scheduler/dashboard/dashboard.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <charconv>
#include <list>
#include <optional>
#include <variant>

#include "net/address.h"
#include "scheduler/dashboard/dashboard_auth.h"
#include "scheduler/dashboard/dashboard_page.h"
#include "scheduler/dashboard/metrics.h"
#include "scheduler/dashboard/performance_json.h"
#include "scheduler/scheduler.h"
#include "scheduler/dashboard/status_json.h"

namespace psched {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

StatusOr<DashboardAddress> parse_dashboard_address(const std::string& text) {
  DashboardAddress a;
  if (text == "none") {
    a.enabled = false;
    return a;
  }
  auto bad = [&](const std::string& why) {
    return Status::invalid(fmt::format("invalid --dashboard-address '{}': {} (expected none, :PORT, "
                                       "HOST:PORT or HOST)", text, why));
  };
  std::string rest = text.rfind("http://", 0) == 0 ? text.substr(7) : text;
  if (rest.empty()) return bad("empty");
  if (rest[0] == ':') {  // ":PORT": every interface
    unsigned port = 0;
    const char* end = rest.data() + rest.size();
    auto [ptr, ec] = std::from_chars(rest.data() + 1, end, port);
    if (rest.size() == 1 || ec != std::errc() || ptr != end || port > 65535)
      return bad("port must be a number from 0 to 65535");
    a.port = uint16_t(port);
    return a;
  }
  auto parsed = parse_address(rest, kDefaultDashboardPort);
  if (!parsed) return bad(parsed.message());
  a.host = parsed->host;
  a.port = parsed->port;
  return a;
}

namespace {

constexpr size_t kHeaderLimitBytes = 8 * 1024;
constexpr size_t kBodyLimitBytes = 4 * 1024;
constexpr auto kRequestTimeout = std::chrono::seconds(10);
constexpr auto kSampleInterval = std::chrono::seconds(1);

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

bool all_interfaces(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::";
}

class HttpSession;

// Shared by the Dashboard and its sessions so a session outliving the Dashboard (its handlers
// still queued on the loop) finds a stopped server instead of a dangling one.
struct DashboardServer : std::enable_shared_from_this<DashboardServer> {
  DashboardServer(asio::io_context& io, const Scheduler& scheduler)
      : io(io),
        scheduler(scheduler),
        tls(scheduler.config().dashboard_tls),
        auth(scheduler.config().token, tls != nullptr),
        acceptor(io),
        sampler(io),
        accept_retry(io) {}

  void accept();
  void sample();
  void stop();
  Response respond(const Request& request);

  asio::io_context& io;
  const Scheduler& scheduler;
  std::shared_ptr<asio::ssl::context> tls;  // HTTPS when set
  DashboardAuth auth;
  tcp::acceptor acceptor;
  asio::steady_timer sampler, accept_retry;
  WorkerRates rates;
  std::string url;
  bool stopped = false;
  std::list<HttpSession*> sessions;  // open connections, oldest first
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, std::shared_ptr<DashboardServer> server)
      : stream_(make_stream(std::move(socket), server->tls.get())), server_(std::move(server)) {
    position_ = server_->sessions.insert(server_->sessions.end(), this);
  }
  ~HttpSession() { unlist(); }

  void unlist() {
    if (listed_) server_->sessions.erase(position_);
    listed_ = false;
  }
  void close() {
    beast::error_code ec;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
    lowest().close();
  }
  // The first request, after the TLS handshake when there is one (under the same deadline).
  void start() {
    auto* tls = std::get_if<TlsStream>(&stream_);
    if (!tls) return read();
    lowest().expires_after(kRequestTimeout);
    tls->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (ec || self->server_->stopped) return self->close();
      self->read();
    });
  }
  void read() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimitBytes);
    parser_->body_limit(kBodyLimitBytes);
    lowest().expires_after(kRequestTimeout);
    std::visit([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
    }, stream_);
  }

 private:
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;
  using Stream = std::variant<beast::tcp_stream, TlsStream>;
  static Stream make_stream(tcp::socket socket, asio::ssl::context* tls) {
    if (!tls) return Stream(std::in_place_index<0>, std::move(socket));
    return Stream(std::in_place_index<1>, std::move(socket), *tls);
  }
  beast::tcp_stream& lowest() {
    return std::visit([](auto& stream) -> beast::tcp_stream& { return beast::get_lowest_layer(stream); },
                      stream_);
  }

  void on_read(beast::error_code ec) {
    if (server_->stopped || ec == beast::error::timeout || ec == http::error::end_of_stream ||
        ec == asio::error::operation_aborted) {
      return close();
    }
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      return reply_error(http::status::request_header_fields_too_large, "request header too large");
    }
    if (ec == http::error::body_limit) {
      return reply_error(http::status::payload_too_large, "request body too large");
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      // Any other parse error: junk, a bad method, version, header or chunk encoding.
      return reply_error(http::status::bad_request, "bad request");
    }
    if (ec) return close();  // reset, broken pipe, ...
    const Request& request = parser_->get();
    if (auto refused = server_->auth.gate(request)) response_ = std::move(*refused);
    else response_ = server_->respond(request);
    response_.keep_alive(request.keep_alive());
    write();
  }

  void reply_error(http::status status, const char* why) {
    response_ = Response{status, 11};
    response_.set(http::field::content_type, "text/plain; charset=utf-8");
    response_.body() = std::string(why) + "\n";
    response_.keep_alive(false);
    response_.prepare_payload();
    write();
  }

  void write() {
    lowest().expires_after(kRequestTimeout);
    std::visit([this](auto& stream) {
      http::async_write(stream, response_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec || self->server_->stopped || self->response_.need_eof()) return self->close();
        self->read();
      });
    }, stream_);
  }

  Stream stream_;
  beast::flat_buffer buffer_{kHeaderLimitBytes + kBodyLimitBytes};
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  std::shared_ptr<DashboardServer> server_;
  std::list<HttpSession*>::iterator position_;
  bool listed_ = true;
};

void DashboardServer::accept() {
  acceptor.async_accept([self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (self->stopped || ec == asio::error::operation_aborted) return;
    if (ec) {
      // Out of file descriptors, most likely: try again shortly instead of spinning.
      spdlog::warn("dashboard: accept failed: {}", ec.message());
      self->accept_retry.expires_after(std::chrono::milliseconds(100));
      self->accept_retry.async_wait([self](beast::error_code ec2) {
        if (!ec2 && !self->stopped) self->accept();
      });
      return;
    }
    if (self->sessions.size() >= Dashboard::kMaxSessions) {
      HttpSession* oldest = self->sessions.front();
      oldest->unlist();
      oldest->close();
    }
    std::make_shared<HttpSession>(std::move(socket), self)->start();
    self->accept();
  });
}

void DashboardServer::sample() {
  rates.sample(scheduler, std::chrono::steady_clock::now());
  sampler.expires_after(kSampleInterval);
  sampler.async_wait([self = shared_from_this()](beast::error_code ec) {
    if (!ec && !self->stopped) self->sample();
  });
}

void DashboardServer::stop() {
  if (stopped) return;
  stopped = true;
  beast::error_code ec;
  acceptor.close(ec);
  sampler.cancel();
  accept_retry.cancel();
  while (!sessions.empty()) {
    HttpSession* s = sessions.front();
    s->unlist();
    s->close();
  }
}

Response DashboardServer::respond(const Request& request) {
  Response r{http::status::ok, request.version()};
  r.set(http::field::server, "psched/" PSCHED_VERSION);
  r.set(http::field::cache_control, "no-store");
  r.set("X-Content-Type-Options", "nosniff");
  auto reply = [&](http::status status, const char* type, std::string body) {
    r.result(status);
    r.set(http::field::content_type, type);
    r.body() = std::move(body);
    r.prepare_payload();
    return std::move(r);
  };
  if (request.method() != http::verb::get) {
    r.set(http::field::allow, "GET");
    return reply(http::status::method_not_allowed, "text/plain; charset=utf-8",
                 "method not allowed: the dashboard is read-only (GET)\n");
  }
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find_first_of("?#"));
  try {
    if (path == "/" || path == "/index.html") {
      r.set("Content-Security-Policy",
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
      return reply(http::status::ok, "text/html; charset=utf-8", dashboard_page());
    }
    if (path == "/api/status") {
      const bool devices = target.find("?devices=0") == std::string_view::npos &&
                           target.find("&devices=0") == std::string_view::npos;
      std::string body = status_json(scheduler, rates, url, devices);  // megabytes for thousands of workers: no copy
      body += '\n';
      return reply(http::status::ok, "application/json", std::move(body));
    }
    if (path == "/api/task-stream")
      return reply(http::status::ok, "application/json",
                   dump_json(task_stream_json(scheduler, since_from_query(target))) + "\n");
    if (path == "/metrics")
      return reply(http::status::ok, "text/plain; version=0.0.4; charset=utf-8",
                   metrics_text(scheduler));
    if (path == "/health") return reply(http::status::ok, "text/plain; charset=utf-8", "ok\n");
  } catch (const std::exception& e) {  // nothing may escape into the loop
    spdlog::error("dashboard: {} failed: {}", path, e.what());
    return reply(http::status::internal_server_error, "text/plain; charset=utf-8",
                 "internal error\n");
  }
  return reply(http::status::not_found, "text/plain; charset=utf-8",
               "not found: try /, /api/status, /metrics or /health\n");
}

}  // namespace

struct Dashboard::Impl {
  std::shared_ptr<DashboardServer> server;
  uint16_t port = 0;
  std::string url;
};

Dashboard::Dashboard(asio::io_context& io, const Scheduler& scheduler)
    : impl_(std::make_unique<Impl>()) {
  impl_->server = std::make_shared<DashboardServer>(io, scheduler);
}

Dashboard::~Dashboard() { stop(); }

void Dashboard::reload_credentials() {
  DashboardServer& server = *impl_->server;
  const SchedulerConfig& config = server.scheduler.config();
  if (server.tls && config.dashboard_tls) server.tls = config.dashboard_tls;
  if (!server.auth.holds(config.token)) server.auth = DashboardAuth(config.token, server.tls != nullptr);
}

Status Dashboard::start(const std::string& address) {
  auto parsed = parse_dashboard_address(address);
  if (!parsed) return parsed.status();
  if (!parsed->enabled) {
    spdlog::info("dashboard disabled");
    return Status::ok();
  }
  DashboardServer& server = *impl_->server;
  const std::string shown = fmt::format("{}:{}", parsed->host.empty() ? "0.0.0.0" : parsed->host,
                                        parsed->port);
  beast::error_code ec;
  tcp::endpoint endpoint(tcp::v4(), parsed->port);
  if (!parsed->host.empty()) {
    tcp::resolver resolver(server.io);
    auto results = resolver.resolve(parsed->host, std::to_string(parsed->port),
                                    tcp::resolver::passive, ec);
    if (ec || results.empty())
      return Status::error(fmt::format("cannot listen for the dashboard on {}: {}", shown,
                                       ec ? ec.message() : "host not found"));
    endpoint = results.begin()->endpoint();
  }
  server.acceptor.open(endpoint.protocol(), ec);
  if (!ec) server.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) server.acceptor.bind(endpoint, ec);
  if (!ec) server.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;  // close() must not overwrite the error we report ("Success")
    server.acceptor.close(ignored);
    return Status::error(fmt::format("cannot listen for the dashboard on {}: {}", shown,
                                     ec.message()));
  }
  impl_->port = server.acceptor.local_endpoint().port();
  std::string host = parsed->host;
  if (all_interfaces(host)) {
    char name[256] = {};
    host = gethostname(name, sizeof(name) - 1) == 0 && name[0] ? name : "127.0.0.1";
  }
  const char* scheme = server.tls ? "https" : "http";
  impl_->url = host.find(':') != std::string::npos
                   ? fmt::format("{}://[{}]:{}", scheme, host, impl_->port)
                   : fmt::format("{}://{}:{}", scheme, host, impl_->port);
  server.url = impl_->url;
  spdlog::info("dashboard at {}", impl_->url);
  if (!server.auth.required())
    spdlog::warn("the dashboard, /api/status and /metrics are open to anyone who can reach {} (no cluster "
                 "token: give --token-file to require it)", impl_->url);
  else if (!server.tls)
    spdlog::warn("the dashboard asks for the cluster token over plain HTTP, where anyone on the path can "
                 "read it: give --tls-ca-file, --tls-cert and --tls-key to serve HTTPS");
  server.accept();
  server.sample();
  return Status::ok();
}

void Dashboard::stop() {
  if (impl_ && impl_->server) impl_->server->stop();
}

uint16_t Dashboard::port() const { return impl_->port; }
std::string Dashboard::url() const { return impl_->url; }

}  // namespace psched
