// Who may read the dashboard (docs/design.md, "Dashboard"). With a cluster token, every path but
// /health needs it: as "Authorization: Bearer TOKEN" (Prometheus' bearer-token setting, curl -H), or
// as the session cookie that POST /login sets once a browser has presented the token in a form, so
// that the token never travels in a URL (URLs end up in logs and histories). Without a token the
// dashboard is open, and psched says so at start.
#pragma once

#include <boost/beast/http.hpp>

#include <optional>
#include <string>
#include <string_view>

namespace psched {

class DashboardAuth {
 public:
  using Request = boost::beast::http::request<boost::beast::http::string_body>;
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  // `secure`: the dashboard is served over HTTPS (the cookie is then marked Secure).
  DashboardAuth(std::string token, bool secure);

  bool required() const { return !token_.empty(); }
  bool holds(const std::string& token) const { return token_ == token; }
  // The response for a request the gate stops: 401 (no or a wrong token), the login form, or the
  // redirect that sets the session cookie after a good POST /login. Nothing for a request that may
  // pass (then the dashboard answers it as usual).
  std::optional<Response> gate(const Request& request) const;

 private:
  bool authorized(const Request& request) const;
  Response login(const Request& request) const;

  std::string token_;
  std::string session_;  // the cookie's value: random, made at start, never derived from the token
  bool secure_;
};

}  // namespace psched
