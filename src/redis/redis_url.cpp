// parse_redis_url: redis://[[user]:password@]host[:port][/db]
#include <sluice/redis_backend.hpp>

#include <charconv>
#include <limits>

namespace sluice {
namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes; a stray '%' is an error rather than a silent literal, so a
// password that was meant to be encoded does not reach AUTH half-decoded.
bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out += in[i];
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = hex_value(in[i + 1]);
    const int lo = hex_value(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return true;
}

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
  constexpr std::string_view scheme = "redis://";
  if (url.starts_with("rediss://"))
    return fail(why, "rediss:// (TLS) is not supported: Debian's hiredis 0.14 has no TLS");
  if (!url.starts_with(scheme)) return fail(why, "a Redis URL must start with redis://");
  std::string_view rest = url.substr(scheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos)
    return fail(why, "query parameters and fragments are not supported in a Redis URL");

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
