// sluiced's config apart from YAML (config_yaml.cpp reads that): errors, defaults, the
// listen addresses and what may be logged of a backend URL.
#include "config.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include <boost/asio/ip/address.hpp>

namespace sluice::daemon {
namespace {

std::string render(const std::string& file, int line, const std::string& field,
                   const std::string& message) {
  std::string s = file;
  s += ':';
  s += std::to_string(line);
  s += ": ";
  if (!field.empty()) {
    s += field;
    s += ": ";
  }
  s += message;
  return s;
}

}  // namespace

config_error::config_error(std::string file, int line, std::string field, std::string message)
    : std::runtime_error(render(file, line, field, message)),
      file_(std::move(file)),
      line_(line),
      field_(std::move(field)),
      message_(std::move(message)) {}

std::string_view to_string(rls_failure_mode m) noexcept {
  switch (m) {
    case rls_failure_mode::unavailable:
      return "unavailable";
    case rls_failure_mode::open:
      return "open";
    case rls_failure_mode::closed:
      return "closed";
    case rls_failure_mode::local:
      return "local";
  }
  return "unavailable";
}

std::string envoy_rls_config::listen() const {
  if (listen_host.find(':') != std::string::npos) {
    return "[" + listen_host + "]:" + std::to_string(listen_port);
  }
  return listen_host + ":" + std::to_string(listen_port);
}

std::string config::listen() const {
  if (listen_host.find(':') != std::string::npos) {
    return "[" + listen_host + "]:" + std::to_string(listen_port);
  }
  return listen_host + ":" + std::to_string(listen_port);
}

void parse_listen(std::string_view text, config& c) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    throw std::invalid_argument("must be HOST:PORT, e.g. 127.0.0.1:8080 or [::1]:8080");
  }
  auto host = text.substr(0, colon);
  const auto port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string_view::npos) {
    throw std::invalid_argument("an IPv6 address must be in brackets, e.g. [::1]:8080");
  }
  boost::system::error_code ec;
  boost::asio::ip::make_address(std::string(host), ec);
  if (ec) throw std::invalid_argument("\"" + std::string(host) + "\" is not an IP address");
  unsigned port = 0;
  auto [p, err] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (err != std::errc{} || p != port_text.data() + port_text.size() || port > 65535) {
    throw std::invalid_argument("\"" + std::string(port_text) + "\" is not a port (0..65535)");
  }
  c.listen_host = std::string(host);
  c.listen_port = static_cast<std::uint16_t>(port);
}

config default_config() {
  config c;
  c.source = "<default>";
  c.keys.trusted_proxies = {*http::parse_cidr("127.0.0.1/32"), *http::parse_cidr("::1/128")};
  policy p;
  p.capacity = 10;
  p.refill_per_second = 1;
  c.policies.emplace("default", p);
  http::rule r;
  r.name = "default";
  r.policy = "default";
  c.rules.push_back(r);
  return c;
}

std::string redacted_url(std::string_view url) {
  std::string out(url);
  // user info: scheme://[user][:password]@host...
  const auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    const auto start = scheme + 3;
    // As the URL parsers read it: the authority ends at the first '/' or '?', and the user
    // info at the LAST '@' before that (a password may contain '@').
    const auto end = std::min(out.find_first_of("/?", start), out.size());
    const auto at = end > start ? out.rfind('@', end - 1) : std::string::npos;
    if (at != std::string::npos && at >= start) {
      const auto colon = out.find(':', start);
      if (colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // query options: ...?a=1&sentinel_password=pw
  const auto query = out.find('?');
  if (query == std::string::npos) return out;
  std::size_t i = query + 1;
  while (i < out.size()) {
    auto end = out.find('&', i);
    if (end == std::string::npos) end = out.size();
    const auto eq = out.find('=', i);
    if (eq != std::string::npos && eq < end) {
      const std::string_view name(out.data() + i, eq - i);
      if (name.ends_with("password")) {
        out.replace(eq + 1, end - eq - 1, "***");
        end = eq + 4;
      }
    }
    i = end + 1;
  }
  return out;
}

}  // namespace sluice::daemon
