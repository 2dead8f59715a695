#include "scheduler/dashboard/dashboard_auth.h"

#include <fmt/format.h>
#include <openssl/rand.h>

#include <cctype>

#include "core/check.h"
#include "net/token.h"

namespace psched {

namespace http = boost::beast::http;

namespace {

constexpr std::string_view kCookieName = "psched_session";

// The login form: a POST, so that the token goes in the body, never in a URL.
std::string login_page(std::string_view note) {
  return fmt::format(R"(<!doctype html>
<html><head><meta charset="utf-8"><title>psched: sign in</title></head>
<body style="font-family: sans-serif; margin: 3em">
<h1>psched dashboard</h1>
<p>{}</p>
<form method="post" action="/login">
<label>Cluster token <input type="password" name="token" id="token" autofocus></label>
<button type="submit" id="sign-in">Sign in</button>
</form>
</body></html>
)", note);
}

// application/x-www-form-urlencoded: the value of `name` in `body`, decoded.
std::optional<std::string> form_value(std::string_view body, std::string_view name) {
  while (!body.empty()) {
    const size_t amp = body.find('&');
    const std::string_view pair = body.substr(0, amp);
    body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string value;
    const std::string_view raw = pair.substr(eq + 1);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '+') {
        value += ' ';
      } else if (raw[i] == '%' && i + 2 < raw.size() && std::isxdigit(static_cast<unsigned char>(raw[i + 1])) &&
                 std::isxdigit(static_cast<unsigned char>(raw[i + 2]))) {
        value += char(std::stoi(std::string(raw.substr(i + 1, 2)), nullptr, 16));
        i += 2;
      } else {
        value += raw[i];
      }
    }
    return value;
  }
  return std::nullopt;
}

// The value of cookie `name` in a Cookie header ("a=1; b=2").
std::string_view cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const size_t semi = header.find(';');
    std::string_view item = header.substr(0, semi);
    header = semi == std::string_view::npos ? std::string_view() : header.substr(semi + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    if (item.size() > name.size() && item.substr(0, name.size()) == name && item[name.size()] == '=')
      return item.substr(name.size() + 1);
  }
  return {};
}

DashboardAuth::Response text_response(http::status status, unsigned version, std::string type,
                                      std::string body) {
  DashboardAuth::Response r{status, version};
  r.set(http::field::server, "psched/" PSCHED_VERSION);
  r.set(http::field::cache_control, "no-store");
  r.set("X-Content-Type-Options", "nosniff");
  r.set(http::field::content_type, type);
  r.body() = std::move(body);
  r.prepare_payload();
  return r;
}

}  // namespace

DashboardAuth::DashboardAuth(std::string token, bool secure) : token_(std::move(token)), secure_(secure) {
  unsigned char bytes[32];
  const int made = RAND_bytes(bytes, sizeof(bytes));
  PSCHED_ASSERT(made == 1, made);
  for (unsigned char b : bytes) session_ += fmt::format("{:02x}", b);
}

bool DashboardAuth::authorized(const Request& request) const {
  const auto authorization = request[http::field::authorization];
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() > kBearer.size() &&
      std::string_view(authorization.data(), kBearer.size()) == kBearer)
    return same_token(std::string_view(authorization.data(), authorization.size()).substr(kBearer.size()), token_);
  const auto cookie = request[http::field::cookie];
  const std::string_view session = cookie_value(std::string_view(cookie.data(), cookie.size()), kCookieName);
  return !session.empty() && same_token(session, session_);
}

DashboardAuth::Response DashboardAuth::login(const Request& request) const {
  const std::optional<std::string> token = form_value(request.body(), "token");
  if (!token || !same_token(*token, token_))
    return text_response(http::status::unauthorized, request.version(), "text/html; charset=utf-8",
                         login_page("Wrong token. This dashboard needs the cluster token."));
  Response r = text_response(http::status::see_other, request.version(), "text/plain; charset=utf-8",
                             "signed in\n");
  r.set(http::field::location, "/");
  r.set(http::field::set_cookie,
        fmt::format("{}={}; Path=/; HttpOnly; SameSite=Lax{}", kCookieName, session_,
                    secure_ ? "; Secure" : ""));
  return r;
}

std::optional<DashboardAuth::Response> DashboardAuth::gate(const Request& request) const {
  if (!required()) return std::nullopt;
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find_first_of("?#"));
  if (path == "/health") return std::nullopt;
  if (path == "/login") {
    if (request.method() == http::verb::post) return login(request);
    return text_response(http::status::ok, request.version(), "text/html; charset=utf-8",
                         login_page("This dashboard needs the cluster token."));
  }
  if (authorized(request)) return std::nullopt;
  if (path == "/" || path == "/index.html")
    return text_response(http::status::unauthorized, request.version(), "text/html; charset=utf-8",
                         login_page("This dashboard needs the cluster token."));
  Response r = text_response(http::status::unauthorized, request.version(), "text/plain; charset=utf-8",
                             "unauthorized: send the cluster token as 'Authorization: Bearer TOKEN'\n");
  r.set(http::field::www_authenticate, "Bearer realm=\"psched\"");
  return r;
}

}  // namespace psched
