// parse_redis_url: redis://[[user]:password@]host[:port][/db] and
// rediss://[[user]:password@]host[:port][/db][?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=yes|no]
#include <sluice/redis_backend.hpp>

#include <charconv>
#include <limits>
#include <vector>

#include "redis/url_query.hpp"

namespace sluice {
namespace {

using redis::percent_decode;

template <class Int>
bool parse_uint(std::string_view s, Int& out, Int max) {
  if (s.empty()) return false;
  unsigned long long v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || v > static_cast<unsigned long long>(max))
    return false;
  out = static_cast<Int>(v);
  return true;
}

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

bool parse(std::string_view url, redis_url& out, std::string* why) {
  std::string_view rest;
  if (url.starts_with("rediss://")) {
    out.tls.enabled = true;
    rest = url.substr(9);
  } else if (url.starts_with("redis://")) {
    rest = url.substr(8);
  } else {
    return fail(why, "a Redis URL must start with redis:// or rediss:// (TLS)");
  }
  if (rest.find('#') != std::string_view::npos)
    return fail(why, "fragments ('#') are not supported in a Redis URL");
  if (const auto q = rest.find('?'); q != std::string_view::npos) {
    std::vector<redis::query_option> options;
    if (!redis::parse_query(rest.substr(q + 1), options, why)) return false;
    for (const auto& o : options) {
      const auto r = redis::apply_tls_option(o, out.tls, why);
      if (r == redis::option_result::invalid) return false;
      if (r == redis::option_result::unknown)
        return fail(why, "unknown query option \"" + o.name +
                             "\" (known: " + std::string(redis::tls_option_names) + ")");
    }
    if (!redis::check_tls(out.tls, !options.empty(), "rediss://", why)) return false;
    rest = rest.substr(0, q);
  }

  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !parse_uint(db, out.db, std::numeric_limits<int>::max()))
      return fail(why, "database must be a non-negative integer after the '/', got \"" +
                           std::string(db) + "\"");
  }

  // The last '@' ends the user info, so an unencoded '@' in a password still parses.
  const auto at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const auto colon = userinfo.find(':');
    if (colon == std::string_view::npos)
      return fail(why, "user info must be [user]:password (a password alone is \":password@\")");
    if (!percent_decode(userinfo.substr(0, colon), out.user))
      return fail(why, "bad percent-encoding in the user name");
    if (!percent_decode(userinfo.substr(colon + 1), out.password))
      return fail(why, "bad percent-encoding in the password");
    if (out.password.empty() && !out.user.empty())
      return fail(why, "a user name needs a password (user:password@)");
  }

  std::string_view port;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return fail(why, "IPv6 host is missing its closing ']'");
    out.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return fail(why, "unexpected text after the IPv6 host");
      port = after.substr(1);
      if (port.empty()) return fail(why, "empty port after ':'");
    }
  } else {
    if (authority.find(':') != authority.rfind(':'))
      return fail(why, "an IPv6 host must be written in brackets, e.g. redis://[::1]:6379");
    const auto colon = authority.find(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port = authority.substr(colon + 1);
      if (port.empty()) return fail(why, "empty port after ':'");
    }
  }
  if (out.host.empty()) return fail(why, "missing host");
  if (!port.empty() && (!parse_uint(port, out.port, std::uint16_t{65535}) || out.port == 0))
    return fail(why, "port must be 1..65535, got \"" + std::string(port) + "\"");
  return true;
}

}  // namespace

std::optional<redis_url> parse_redis_url(std::string_view url, std::string* why) {
  redis_url out;
  if (!parse(url, out, why)) return std::nullopt;
  return out;
}

}  // namespace sluice
