// parse_redis_cluster_url and parse_redis_sentinel_url. Each host, and the user info, is
// checked by parse_redis_url (the one place that knows hosts, ports, IPv6 brackets and
// percent-encoding), so the three URL kinds accept exactly the same spellings.
#include <sluice/redis_cluster.hpp>
#include <sluice/redis_sentinel.hpp>

#include <sluice/backend_url.hpp>

#include <charconv>
#include <limits>

#include "redis/url_query.hpp"

namespace sluice {
namespace {

bool fail(std::string* why, std::string text) {
  if (why) *why = std::move(text);
  return false;
}

// True when `host_port` names a port ("h:p", "[v6]:p"); otherwise the default is added.
bool has_port(std::string_view host_port) {
  if (host_port.starts_with('[')) {
    const auto close = host_port.find(']');
    return close != std::string_view::npos && close + 1 < host_port.size();
  }
  return host_port.find(':') != std::string_view::npos;
}

// "user:pass@h1:p1,h2:p2" -> credentials and endpoints.
bool parse_authority(std::string_view authority, std::uint16_t default_port, std::string& user,
                     std::string& password, std::vector<redis_endpoint>& out, std::string* why) {
  // The last '@' ends the user info, as in parse_redis_url (an unencoded '@' in a password).
  const auto at = authority.rfind('@');
  std::string_view hosts = authority;
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    hosts = authority.substr(at + 1);
    const auto creds = parse_redis_url("redis://" + std::string(userinfo) + "@127.0.0.1", why);
    if (!creds) return false;
    user = creds->user;
    password = creds->password;
  }
  if (hosts.empty()) return fail(why, "missing host:port");
  for (std::size_t start = 0; start <= hosts.size();) {
    const auto comma = std::min(hosts.find(',', start), hosts.size());
    const std::string_view one = hosts.substr(start, comma - start);
    if (one.empty()) return fail(why, "empty host in the list (a stray ',')");
    std::string url = "redis://" + std::string(one);
    if (!has_port(one)) url += ":" + std::to_string(default_port);
    std::string host_why;
    const auto parsed = parse_redis_url(url, &host_why);
    if (!parsed) return fail(why, "\"" + std::string(one) + "\": " + host_why);
    out.push_back({parsed->host, parsed->port});
    start = comma + 1;
  }
  return true;
}

// "redis+KIND://" or "rediss+KIND://" (TLS); `rest` is what follows it, without the
// query, which goes to `options`.
bool split_url(std::string_view url, std::string_view kind, std::string_view& rest, redis_tls& tls,
               std::vector<redis::query_option>& options, std::string* why) {
  const std::string plain = "redis+" + std::string(kind) + "://";
  const std::string secure = "rediss+" + std::string(kind) + "://";
  if (url.starts_with(secure)) {
    tls.enabled = true;
    rest = url.substr(secure.size());
  } else if (url.starts_with(plain)) {
    rest = url.substr(plain.size());
  } else {
    return fail(why, "a Redis " + std::string(kind == "cluster" ? "Cluster" : "Sentinel") +
                         " URL must start with " + plain + " or " + secure + " (TLS)");
  }
  if (rest.find('#') != std::string_view::npos)
    return fail(why, "fragments ('#') are not supported in a Redis URL");
  const auto q = rest.find('?');
  if (q == std::string_view::npos) return true;
  if (!redis::parse_query(rest.substr(q + 1), options, why)) return false;
  rest = rest.substr(0, q);
  return true;
}

bool apply_tls_options(const std::vector<redis::query_option>& options, redis_tls& tls,
                       std::string_view secure_scheme, std::string_view extra_names,
                       std::string* why) {
  bool had_tls = false;
  for (const auto& o : options) {
    const auto r = redis::apply_tls_option(o, tls, why);
    if (r == redis::option_result::invalid) return false;
    if (r == redis::option_result::unknown)
      return fail(why, "unknown query option \"" + o.name + "\" (known: " +
                           std::string(extra_names) + std::string(redis::tls_option_names) + ")");
    had_tls = true;
  }
  return redis::check_tls(tls, had_tls, secure_scheme, why);
}

}  // namespace

std::optional<redis_cluster_url> parse_redis_cluster_url(std::string_view url, std::string* why) {
  redis_cluster_url out;
  std::string_view rest;
  std::vector<redis::query_option> options;
  if (!split_url(url, "cluster", rest, out.tls, options, why) ||
      !apply_tls_options(options, out.tls, "rediss+cluster://", "", why))
    return std::nullopt;
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    fail(why, "a Redis Cluster has only database 0: remove the \"/...\" after the hosts");
    return std::nullopt;
  }
  if (!parse_authority(rest, 6379, out.user, out.password, out.seeds, why)) return std::nullopt;
  return out;
}

bool validate_redis_url(std::string_view url, std::string* why) {
  const auto scheme = parse_backend_scheme(url);
  if (scheme && scheme->kind == backend_kind::redis_cluster)
    return parse_redis_cluster_url(url, why).has_value();
  if (scheme && scheme->kind == backend_kind::redis_sentinel)
    return parse_redis_sentinel_url(url, why).has_value();
  return parse_redis_url(url, why).has_value();
}

std::optional<redis_sentinel_url> parse_redis_sentinel_url(std::string_view url, std::string* why) {
  redis_sentinel_url out;
  std::string_view rest;
  std::vector<redis::query_option> options;
  if (!split_url(url, "sentinel", rest, out.tls, options, why)) return std::nullopt;
  // The sentinels' own credentials; the rest are TLS options.
  std::vector<redis::query_option> tls_options;
  for (auto& o : options) {
    if (o.name == "sentinel_password") {
      out.sentinel_password = std::move(o.value);
    } else if (o.name == "sentinel_user") {
      out.sentinel_user = std::move(o.value);
    } else {
      tls_options.push_back(std::move(o));
    }
  }
  if (!out.sentinel_user.empty() && out.sentinel_password.empty()) {
    fail(why, "sentinel_user= needs sentinel_password=");
    return std::nullopt;
  }
  if (!apply_tls_options(tls_options, out.tls, "rediss+sentinel://",
                         "sentinel_password, sentinel_user, ", why))
    return std::nullopt;
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) {
    fail(why, "missing the master's name: redis+sentinel://host:port/MASTER_NAME");
    return std::nullopt;
  }
  if (!parse_authority(rest.substr(0, slash), 26379, out.user, out.password, out.sentinels, why))
    return std::nullopt;
  std::string_view path = rest.substr(slash + 1);
  const auto db_slash = path.find('/');
  out.master_name = std::string(path.substr(0, db_slash));
  if (out.master_name.empty()) {
    fail(why, "missing the master's name: redis+sentinel://host:port/MASTER_NAME");
    return std::nullopt;
  }
  if (db_slash != std::string_view::npos) {
    const std::string_view db = path.substr(db_slash + 1);
    const auto [p, ec] = std::from_chars(db.data(), db.data() + db.size(), out.db);
    if (db.empty() || ec != std::errc{} || p != db.data() + db.size() || out.db < 0) {
      fail(why, "database must be a non-negative integer after the master's name, got \"" +
                    std::string(db) + "\"");
      return std::nullopt;
    }
  }
  return out;
}

}  // namespace sluice
