// The YAML reader of sluiced's config (config.hpp holds the schema): walks the tree, reads
// each field into the config's structs and checks it there, so that every error is
// `FILE:LINE: field: message` (config_error: sluiced exits 2, --check-config says why, a
// reload is refused). The structs, their defaults and what needs no YAML are in config.cpp.
#include "config.hpp"

#include "admin.hpp"
#include "envoy/rls_config.hpp"
#include "pem_file.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <system_error>

#include <yaml-cpp/yaml.h>
#include <boost/asio/ip/address.hpp>

#include <sluice/error.hpp>
#include <sluice/http/duration.hpp>
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>

namespace sluice::daemon {
namespace {

// Walks the YAML tree; every error names the file, the node's line and the field path.
class reader {
 public:
  explicit reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const YAML::Node& at, const std::string& field,
                         const std::string& message) const {
    throw config_error(source_, line_of(at), field, message);
  }

  static int line_of(const YAML::Node& n) {
    if (!n.IsDefined()) return 0;
    const auto m = n.Mark();
    return m.line < 0 ? 0 : m.line + 1;
  }

  void expect_map(const YAML::Node& n, const std::string& field) const {
    if (!n.IsMap()) fail(n, field, "must be a mapping");
  }

  // Rejects keys that are not in `known`: a typo must not silently mean "default".
  void only_keys(const YAML::Node& map, const std::string& field,
                 std::initializer_list<std::string_view> known) const {
    for (const auto& kv : map) {
      const auto& k = kv.first;
      if (!k.IsScalar()) fail(k, field, "keys must be plain names");
      const auto name = k.Scalar();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        fail(k, join(field, name), "unknown key");
      }
    }
  }

  // yaml-cpp keeps both entries of a repeated key and lookups see the first, so a second
  // `deny_status:` would be lost without a word. Refuses a repeated key anywhere. The depth
  // is bounded: an alias inside its own anchor (`a: &b {c: *b}`) is an endless tree to
  // yaml-cpp, and no Sluice config nests deeper than a handful of levels.
  void no_duplicate_keys(const YAML::Node& n, const std::string& field, int depth = 0) const {
    if (depth > 32) fail(n, field, "nested too deeply (an alias inside its own anchor?)");
    if (n.IsMap()) {
      std::set<std::string> seen;
      for (const auto& kv : n) {
        const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        if (kv.first.IsScalar() && !seen.insert(name).second)
          fail(kv.first, join(field, name), "duplicate key (already set earlier in this mapping)");
        no_duplicate_keys(kv.second, join(field, name), depth + 1);
      }
    } else if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i)
        no_duplicate_keys(n[i], field + "[" + std::to_string(i) + "]", depth + 1);
    }
  }

  // A quoted scalar ('10') is a string in YAML, whatever it spells.
  void unquoted(const YAML::Node& n, const std::string& field, const char* what) const {
    if (n.Tag() == "!") fail(n, field, std::string("must be ") + what + ", not a quoted string");
  }

  static std::string join(const std::string& parent, const std::string& child) {
    return parent.empty() ? child : parent + "." + child;
  }

  std::string scalar(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) fail(n, field, "must be a scalar");
    return n.Scalar();
  }

  std::string string(const YAML::Node& n, const std::string& field) const {
    auto s = scalar(n, field);
    if (s.empty()) fail(n, field, "must not be empty");
    return s;
  }

  template <class Int>
  Int integer(const YAML::Node& n, const std::string& field, Int lo, Int hi) const {
    const auto s = scalar(n, field);
    unquoted(n, field, "an integer");
    long long v = 0;
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc{} || p != end) fail(n, field, "must be an integer, got \"" + s + "\"");
    if (v < static_cast<long long>(lo) || v > static_cast<long long>(hi)) {
      fail(n, field, "must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + s);
    }
    return static_cast<Int>(v);
  }

  double number(const YAML::Node& n, const std::string& field) const {
    const auto s = scalar(n, field);
    unquoted(n, field, "a number");
    double v = 0;
    const auto* end = s.data() + s.size();
    auto [p, ec] = std::from_chars(s.data(), end, v);
    if (ec != std::errc{} || p != end) fail(n, field, "must be a number, got \"" + s + "\"");
    return v;
  }

  bool boolean(const YAML::Node& n, const std::string& field) const {
    const auto s = scalar(n, field);
    unquoted(n, field, "true or false");
    if (s == "true") return true;
    if (s == "false") return false;
    fail(n, field, "must be true or false, got \"" + s + "\"");
  }

  std::vector<std::string> strings(const YAML::Node& n, const std::string& field) const {
    if (!n.IsSequence()) fail(n, field, "must be a list");
    std::vector<std::string> out;
    for (std::size_t i = 0; i < n.size(); ++i) {
      out.push_back(string(n[i], field + "[" + std::to_string(i) + "]"));
    }
    return out;
  }

  failure_mode mode(const YAML::Node& n, const std::string& field) const {
    const auto s = scalar(n, field);
    auto m = parse_failure_mode(s);
    if (!m) fail(n, field, "must be open, closed or local, got \"" + s + "\"");
    return *m;
  }

  const std::string& source() const noexcept { return source_; }

 private:
  std::string source_;
};

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool valid_log_level(std::string_view s) {
  for (auto l : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (s == l) return true;
  }
  return false;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  });
}

constexpr std::string_view algorithm_names =
    "token_bucket, gcra, sliding_window, sliding_window_counter or fixed_window";

// A duration such as 1m (see http::parse_duration) or, unquoted, a whole number of
// milliseconds; 1 ms..`most` either way (`most_text`: the bound as written, e.g. "366d").
std::chrono::milliseconds duration_of(const reader& r, const YAML::Node& n,
                                      const std::string& field, std::chrono::milliseconds most,
                                      std::string_view most_text) {
  const auto s = r.scalar(n, field);
  const auto out_of_range = "must be 1ms.." + std::string(most_text) + " (1.." +
                            std::to_string(most.count()) + " milliseconds), got " + s;
  const bool digits =
      !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits && n.Tag() != "!") {
    std::int64_t ms = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), ms);
    if (ec != std::errc{} || end != s.data() + s.size() || ms < 1 || ms > most.count())
      r.fail(n, field, out_of_range);
    return std::chrono::milliseconds{ms};
  }
  std::string why;
  const auto d = http::parse_duration(s, &why);
  if (!d && why.find("is not a duration") != std::string::npos)
    r.fail(n, field, why + ", or a whole number of milliseconds");
  if (!d || *d > most) r.fail(n, field, out_of_range);  // 0s, or past 2^63 ms
  return *d;
}

// `window`: 1 ms..366 days.
std::chrono::milliseconds window_of(const reader& r, const YAML::Node& n,
                                    const std::string& field) {
  return duration_of(r, n, field, max_window, "366d");
}

// A lease (a concurrency policy's `lease_ttl`): 1 ms..1 h.
std::chrono::milliseconds lease_of(const reader& r, const YAML::Node& n, const std::string& field) {
  return duration_of(r, n, field, max_lease_ttl, "1h");
}

// A rate policy's `lease_ttl` (quota leases): 0, the default (none), or a lease as above.
std::chrono::milliseconds lease_ttl_of(const reader& r, const YAML::Node& n,
                                       const std::string& field) {
  if (r.scalar(n, field) == "0" && n.Tag() != "!") return std::chrono::milliseconds{0};
  return lease_of(r, n, field);
}

void parse_policy(const reader& r, const YAML::Node& n, const std::string& field,
                  failure_mode default_mode, policy& p) {
  r.expect_map(n, field);
  r.only_keys(n, field,
              {"algorithm", "capacity", "refill_per_second", "limit", "window",
               "on_backend_failure", "lease_ttl"});
  p.on_failure = default_mode;
  if (auto a = n["algorithm"]) {
    const auto s = r.scalar(a, field + ".algorithm");
    auto alg = parse_algorithm(s);
    if (!alg) {
      r.fail(a, field + ".algorithm",
             "unknown algorithm \"" + s + "\" (want " + std::string(algorithm_names) + ")");
    }
    p.algorithm = *alg;
  }
  const bool window = is_window(p.algorithm);
  const auto name =
      std::string(to_string(p.algorithm)) + (n["algorithm"] ? "" : " (the default algorithm)");
  // Parameters of the other family are refused by name: a window with a capacity (or a
  // bucket with a limit) is a policy that does not mean what its author thinks.
  constexpr const char* bucket_keys[] = {"capacity", "refill_per_second"};
  constexpr const char* window_keys[] = {"limit", "window"};
  for (const char* key : window ? bucket_keys : window_keys) {
    if (auto v = n[key]) {
      r.fail(v, field + "." + key,
             window ? "is for token_bucket and gcra; " + name + " takes limit and window"
                    : "is for sliding_window, sliding_window_counter and fixed_window; " + name +
                          " takes capacity and refill_per_second");
    }
  }
  // The node that validate()'s error is about, by field name.
  std::map<std::string, YAML::Node, std::less<>> given;
  auto required = [&](const char* key) {
    auto v = n[key];
    if (!v) r.fail(n, field + "." + key, "is required for " + name);
    given.emplace(key, v);
    return v;
  };
  if (window) {
    p.limit = r.integer<std::uint64_t>(required("limit"), field + ".limit", 1, max_capacity);
    p.window = window_of(r, required("window"), field + ".window");
  } else {
    p.capacity =
        r.integer<std::uint64_t>(required("capacity"), field + ".capacity", 1, max_capacity);
    p.refill_per_second = r.number(required("refill_per_second"), field + ".refill_per_second");
  }
  if (auto m = n["on_backend_failure"]) p.on_failure = r.mode(m, field + ".on_backend_failure");
  if (auto t = n["lease_ttl"]) p.lease_ttl = lease_ttl_of(r, t, field + ".lease_ttl");
  if (auto ec = validate(p)) {
    const char* key = window ? "limit" : "capacity";
    if (ec == errc::invalid_refill_rate || ec == errc::invalid_gcra_rate) key = "refill_per_second";
    if (ec == errc::invalid_window) key = "window";
    r.fail(given.at(key), field + "." + key, ec.message());
  }
}

// A policy with `algorithm: concurrency` (docs/CONCURRENCY.md): a concurrency limit.
bool is_concurrency(const YAML::Node& n) {
  return n.IsMap() && n["algorithm"] && n["algorithm"].IsScalar() &&
         n["algorithm"].Scalar() == "concurrency";
}

void parse_concurrency_policy(const reader& r, const YAML::Node& n, const std::string& field,
                              failure_mode default_mode, concurrency_policy& p) {
  r.only_keys(n, field, {"algorithm", "limit", "lease_ttl", "on_backend_failure"});
  p.on_failure = default_mode;
  auto limit = n["limit"];
  if (!limit) r.fail(n, field + ".limit", "is required for concurrency");
  p.limit = r.integer<std::uint64_t>(limit, field + ".limit", 1, max_concurrency_limit);
  if (auto t = n["lease_ttl"]) p.lease_ttl = lease_of(r, t, field + ".lease_ttl");
  if (auto m = n["on_backend_failure"]) p.on_failure = r.mode(m, field + ".on_backend_failure");
}

void parse_rule(const reader& r, const YAML::Node& n, const std::string& field, const config& c,
                http::rule& rule) {
  r.expect_map(n, field);
  r.only_keys(n, field, {"name", "match", "key", "policy", "shadow", "cost"});
  auto name = n["name"];
  if (!name) r.fail(n, field + ".name", "is required");
  rule.name = r.string(name, field + ".name");
  if (!http::is_valid_name(rule.name)) {
    r.fail(name, field + ".name", "must be 1..64 characters of A-Z a-z 0-9 _ . -");
  }
  if (auto m = n["match"]) {
    const auto mf = field + ".match";
    r.expect_map(m, mf);
    r.only_keys(m, mf, {"path_prefix", "methods", "hosts"});
    if (auto pp = m["path_prefix"]) {
      rule.match.path_prefix = r.string(pp, mf + ".path_prefix");
      if (rule.match.path_prefix.front() != '/')
        r.fail(pp, mf + ".path_prefix", "must start with '/'");
    }
    if (auto ms = m["methods"]) {
      for (auto& s : r.strings(ms, mf + ".methods")) {
        if (!is_token(s)) r.fail(ms, mf + ".methods", "\"" + s + "\" is not an HTTP method");
        rule.match.methods.push_back(upper(s));
      }
    }
    if (auto hs = m["hosts"]) {
      for (auto& s : r.strings(hs, mf + ".hosts")) {
        // Hosts match without the port (Host: a.example:8443 is a.example).
        const auto colon = s.rfind(':');
        if (colon != std::string::npos && (s.front() != '[' || colon > s.rfind(']')))
          r.fail(hs, mf + ".hosts", "\"" + s + "\": hosts are matched without a port");
        rule.match.hosts.push_back(lower(s));
      }
    }
  }
  auto key = n["key"];
  if (!key) r.fail(n, field + ".key", "is required (e.g. ip, header:X-API-Key, ip+path)");
  std::string why;
  auto spec = http::key_spec::parse(r.string(key, field + ".key"), &why);
  if (!spec) r.fail(key, field + ".key", why);
  rule.key = *spec;
  auto pol = n["policy"];
  if (!pol) r.fail(n, field + ".policy", "is required");
  rule.policy = r.string(pol, field + ".policy");
  auto it = c.policies.find(rule.policy);
  if (it == c.policies.end() && c.concurrency_policies.contains(rule.policy)) {
    // Forward-auth answers before the upstream request runs and never learns when it ends,
    // so it could not give a slot back: a slot held for its lease would bound requests
    // started per lease_ttl (a rate, under a concurrency policy's name), not requests in
    // flight. docs/CONCURRENCY.md: the upstream takes and returns its slot itself.
    r.fail(pol, field + ".policy",
           "\"" + rule.policy +
               "\" is a concurrency policy; rules (forward-auth /v1/auth) take rate policies "
               "only: /v1/auth never learns when the upstream request ends, so it could not "
               "give a slot back; let the upstream call /v1/acquire and /v1/release");
  }
  if (it == c.policies.end()) {
    r.fail(pol, field + ".policy", "no policy named \"" + rule.policy + "\"");
  }
  if (auto s = n["shadow"]) rule.shadow = r.boolean(s, field + ".shadow");
  // At most the policy's capacity (buckets) or limit (windows).
  if (auto v = n["cost"])
    rule.cost = r.integer<std::uint64_t>(v, field + ".cost", 1, limit_of(it->second));
}

// A relative token_file is relative to the config file's directory (sluiced runs from /
// under systemd), and as written when the config has no directory.
std::string resolve_beside(const std::string& source, const std::string& path) {
  if (path.front() == '/') return path;
  const auto slash = source.rfind('/');
  if (slash == std::string::npos) return path;
  return source.substr(0, slash + 1) + path;
}

void parse_admin(const reader& r, const YAML::Node& n, admin_config& out) {
  r.expect_map(n, "admin");
  r.only_keys(n, "admin", {"token_file"});
  auto f = n["token_file"];
  if (!f) r.fail(n, "admin.token_file", "is required (a file holding the admin bearer token)");
  out.token_file = r.string(f, "admin.token_file");
  std::string why;
  auto token = read_admin_token(resolve_beside(r.source(), out.token_file), why);
  if (!token) r.fail(f, "admin.token_file", why);
  out.token = std::move(*token);
}

rls_failure_mode rls_mode(const reader& r, const YAML::Node& n, const std::string& field) {
  const auto s = r.scalar(n, field);
  for (auto m : {rls_failure_mode::unavailable, rls_failure_mode::open, rls_failure_mode::closed,
                 rls_failure_mode::local}) {
    if (s == to_string(m)) return m;
  }
  r.fail(n, field, "must be unavailable, open, closed or local, got \"" + s + "\"");
}

// An HTTP field name (RFC 9110's token): Envoy refuses to add anything else.
std::string header_name(const reader& r, const YAML::Node& n, const std::string& field) {
  auto s = r.string(n, field);
  for (const unsigned char c : s) {
    if (!std::isalnum(c) &&
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      r.fail(n, field, "\"" + s + "\" is not an HTTP header name");
  }
  return s;
}

// `response_headers: true`, or a mapping of the names (which turns them on), as the
// reference's LIMIT_RESPONSE_HEADERS_ENABLED and LIMIT_{LIMIT,REMAINING,RESET}_HEADER.
// `request_headers` is the same for the request Envoy forwards upstream (the reference's
// LIMIT_REQUEST_HEADERS_ENABLED and LIMIT_REQUEST_{LIMIT,REMAINING,RESET}_HEADER).
void parse_rls_headers(const reader& r, const YAML::Node& n, const std::string& field,
                       envoy_rls_config::response_headers_config& out) {
  if (n.IsScalar()) {
    out.enabled = r.boolean(n, field);
    return;
  }
  if (!n.IsMap())
    r.fail(n, field, "must be true, false or a mapping of header names (limit, remaining, reset)");
  r.only_keys(n, field, {"limit", "remaining", "reset"});
  out.enabled = true;
  if (auto v = n["limit"]) out.limit = header_name(r, v, field + ".limit");
  if (auto v = n["remaining"]) out.remaining = header_name(r, v, field + ".remaining");
  if (auto v = n["reset"]) out.reset = header_name(r, v, field + ".reset");
  // One name for two values would make Envoy add both under it, and the client guess.
  if (lower(out.limit) == lower(out.remaining) || lower(out.limit) == lower(out.reset) ||
      lower(out.remaining) == lower(out.reset))
    r.fail(n, field, "limit, remaining and reset must be three different header names");
}

// `tls:` of the gRPC listener: the PEM files are read and checked now (a key that is not the
// certificate's is a config error, not a listener that fails to start).
void parse_rls_tls(const reader& r, const YAML::Node& n, envoy_rls_config::tls_config& out) {
  const std::string field = "envoy_rls.tls";
  r.expect_map(n, field);
  r.only_keys(n, field, {"cert_file", "key_file", "client_ca_file", "client_san"});
  auto cert = n["cert_file"];
  if (!cert) r.fail(n, field + ".cert_file", "is required (the server's certificate chain, PEM)");
  auto key = n["key_file"];
  if (!key) r.fail(n, field + ".key_file", "is required (the private key of cert_file, PEM)");
  auto read = [&](const YAML::Node& v, const std::string& name, pem_kind kind, std::string& path,
                  std::string& resolved, std::string& pem) {
    path = r.string(v, field + "." + name);
    resolved = resolve_beside(r.source(), path);
    std::string why;
    auto text = read_pem_file(resolved, kind, why);
    if (!text) r.fail(v, field + "." + name, why);
    pem = std::move(*text);
  };
  read(cert, "cert_file", pem_kind::certificates, out.cert_file, out.cert_path, out.cert_pem);
  read(key, "key_file", pem_kind::private_key, out.key_file, out.key_path, out.key_pem);
  if (!pem_key_matches(out.cert_pem, out.key_pem))
    r.fail(key, field + ".key_file", "is not the private key of cert_file's certificate");
  if (auto ca = n["client_ca_file"]) {
    read(ca, "client_ca_file", pem_kind::certificates, out.client_ca_file, out.client_ca_path,
         out.client_ca_pem);
  }
  if (auto san = n["client_san"]) {
    out.client_san = r.string(san, field + ".client_san");
    // Only a verified client certificate has names to check.
    if (out.client_ca_file.empty())
      r.fail(san, field + ".client_san", "needs client_ca_file (mutual TLS)");
    if (out.client_san.empty()) r.fail(san, field + ".client_san", "must not be empty");
  }
}

// The gRPC listener's bounds (keys of `envoy_rls:` itself, beside `listen`).
void parse_rls_transport(const reader& r, const YAML::Node& n,
                         envoy_rls_config::transport_config& t) {
  auto ms = [&](const char* key, std::chrono::milliseconds& out, int lo, int hi) {
    if (auto v = n[key]) {
      out = std::chrono::milliseconds{r.integer<int>(v, std::string("envoy_rls.") + key, lo, hi)};
    }
  };
  auto count = [&]<class T>(const char* key, T& out, T lo, T hi) {
    if (auto v = n[key]) out = r.integer<T>(v, std::string("envoy_rls.") + key, lo, hi);
  };
  auto& c = t.connection;
  count("max_connections", t.max_connections, std::size_t{1}, std::size_t{1'000'000});
  count("max_concurrent_streams", c.h2.max_concurrent_streams, std::uint32_t{1},
        std::uint32_t{10'000});
  count("max_header_list_bytes", c.h2.max_header_list_bytes, std::size_t{1024},
        std::size_t{1} << 20);
  count("max_continuations", c.h2.max_continuations, std::size_t{0}, std::size_t{1000});
  count("max_message_bytes", c.h2.max_message_bytes, std::size_t{64}, std::size_t{16} << 20);
  count("stream_reset_burst", c.h2.stream_reset_burst, std::uint64_t{1}, std::uint64_t{1'000'000});
  count("stream_reset_rate", c.h2.stream_reset_rate, std::uint64_t{1}, std::uint64_t{1'000'000});
  count("max_output_bytes", c.max_output_bytes, std::size_t{16} << 10, std::size_t{64} << 20);
  ms("handshake_timeout_ms", c.handshake_timeout, 100, 600'000);
  ms("idle_timeout_ms", c.idle_timeout, 100, 86'400'000);
  ms("request_timeout_ms", c.h2.request_timeout, 100, 3'600'000);
}

// `envoy_rls:`: the listener, and the limits loaded now from the files it names, so that an
// error in them is a config error (exit 2, --check-config, a refused reload) like any other.
void parse_envoy_rls(const reader& r, const YAML::Node& n, envoy_rls_config& out) {
  r.expect_map(n, "envoy_rls");
  r.only_keys(n, "envoy_rls",
              {"listen",
               "config",
               "on_backend_failure",
               "merge_domains",
               "shadow_mode",
               "response_headers",
               "request_headers",
               "per_unit_headers",
               "quota_mode",
               "tls",
               "max_descriptors",
               "max_descriptor_entries",
               "max_metric_series",
               "max_connections",
               "max_concurrent_streams",
               "max_header_list_bytes",
               "max_continuations",
               "max_message_bytes",
               "stream_reset_burst",
               "stream_reset_rate",
               "handshake_timeout_ms",
               "idle_timeout_ms",
               "request_timeout_ms",
               "max_output_bytes"});
  if (auto l = n["listen"]) {
    config tmp;
    try {
      parse_listen(r.string(l, "envoy_rls.listen"), tmp);
    } catch (const std::invalid_argument& e) {
      r.fail(l, "envoy_rls.listen", e.what());
    }
    out.listen_host = tmp.listen_host;
    out.listen_port = tmp.listen_port;
  }
  auto files = n["config"];
  if (!files)
    r.fail(n, "envoy_rls.config",
           "is required (files, or directories of *.yaml files, in the reference service's "
           "format)");
  if (files.IsScalar()) {
    out.config.push_back(r.string(files, "envoy_rls.config"));
  } else {
    out.config = r.strings(files, "envoy_rls.config");
    if (out.config.empty()) r.fail(files, "envoy_rls.config", "names no file or directory");
  }
  if (auto m = n["on_backend_failure"])
    out.on_backend_failure = rls_mode(r, m, "envoy_rls.on_backend_failure");
  if (auto m = n["merge_domains"]) out.merge_domains = r.boolean(m, "envoy_rls.merge_domains");
  if (auto m = n["shadow_mode"]) out.shadow_mode = r.boolean(m, "envoy_rls.shadow_mode");
  if (auto m = n["max_descriptors"])
    out.max_descriptors = r.integer<std::uint32_t>(m, "envoy_rls.max_descriptors", 1, 100'000);
  if (auto m = n["max_descriptor_entries"]) {
    out.max_descriptor_entries =
        r.integer<std::uint32_t>(m, "envoy_rls.max_descriptor_entries", 1, 100'000);
  }
  if (auto m = n["max_metric_series"]) {
    out.max_metric_series = r.integer<std::size_t>(m, "envoy_rls.max_metric_series", 1, 10'000'000);
  }
  if (auto m = n["response_headers"])
    parse_rls_headers(r, m, "envoy_rls.response_headers", out.response_headers);
  if (auto m = n["request_headers"])
    parse_rls_headers(r, m, "envoy_rls.request_headers", out.request_headers);
  if (auto m = n["per_unit_headers"])
    out.per_unit_headers = r.boolean(m, "envoy_rls.per_unit_headers");
  if (auto m = n["quota_mode"]) out.quota_mode = r.boolean(m, "envoy_rls.quota_mode");
  if (auto m = n["tls"]) parse_rls_tls(r, m, out.tls);
  parse_rls_transport(r, n, out.transport);
  std::vector<std::string> paths;
  for (const auto& p : out.config) paths.push_back(resolve_beside(r.source(), p));
  envoy::rls_load_options opts;
  opts.merge_domains = out.merge_domains;
  auto loaded = envoy::load_rls_config(paths, opts);
  if (auto* e = std::get_if<envoy::rls_config_error>(&loaded)) {
    // An error inside a limits file: FILE:LINE of that file, the field says which section
    // named it. A path that is missing or cannot be read has no line of its own: the error
    // is this file's, at the line that names the path.
    if (e->line > 0) throw config_error(e->file, e->line, "envoy_rls.config", e->message);
    const std::string what = e->file + ": " + e->message;
    // (No Node is reassigned here: yaml-cpp's Node::operator= would rewrite the document.)
    for (std::size_t i = 0; files.IsSequence() && i < paths.size(); ++i) {
      if (paths[i] == e->file) r.fail(files[i], "envoy_rls.config", what);
    }
    r.fail(files, "envoy_rls.config", what);
  }
  out.limits =
      std::make_shared<const envoy::rls_config>(std::move(std::get<envoy::rls_config>(loaded)));
}

config parse_root(const reader& r, const YAML::Node& root) {
  config c;
  c.source = r.source();
  if (root.IsNull())
    r.fail(root, "policies", "the config is empty; at least one policy is required");
  r.expect_map(root, "");
  r.no_duplicate_keys(root, "");
  r.only_keys(root, "",
              {"listen",
               "threads",
               "log_level",
               "backend",
               "key_prefix",
               "on_backend_failure",
               "backend_timeout_ms",
               "backend_connect_timeout_ms",
               "redis_connections",
               "memory_max_keys",
               "deny_status",
               "trusted_proxies",
               "forwarded_header",
               "ipv6_prefix",
               "ipv4_prefix",
               "policies",
               "rules",
               "limits",
               "admin",
               "envoy_rls"});

  if (auto n = root["listen"]) {
    try {
      parse_listen(r.string(n, "listen"), c);
    } catch (const std::invalid_argument& e) {
      r.fail(n, "listen", e.what());
    }
  }
  if (auto n = root["threads"]) c.threads = r.integer<unsigned>(n, "threads", 0, 256);
  if (auto n = root["log_level"]) {
    c.log_level = r.string(n, "log_level");
    if (!valid_log_level(c.log_level)) {
      r.fail(n, "log_level", "must be trace, debug, info, warn, error, critical or off");
    }
  }
  if (auto n = root["backend"]) {
    c.backend = r.string(n, "backend");
    std::string why;
    if (c.backend != "memory" && !validate_redis_url(c.backend, &why)) {
      r.fail(
          n, "backend",
          "must be memory or a redis://, rediss://, redis+cluster:// or redis+sentinel:// URL (" +
              why + "), got \"" + c.backend + "\"");
    }
  }
  if (auto n = root["key_prefix"]) c.key_prefix = r.scalar(n, "key_prefix");
  if (auto n = root["on_backend_failure"]) c.on_backend_failure = r.mode(n, "on_backend_failure");
  if (auto n = root["backend_timeout_ms"]) {
    c.backend_timeout =
        std::chrono::milliseconds{r.integer<int>(n, "backend_timeout_ms", 1, 60'000)};
  }
  if (auto n = root["backend_connect_timeout_ms"]) {
    c.backend_connect_timeout =
        std::chrono::milliseconds{r.integer<int>(n, "backend_connect_timeout_ms", 1, 60'000)};
  }
  if (auto n = root["redis_connections"]) {
    const auto v = r.string(n, "redis_connections");
    if (v != "shared" && v != "per_thread") {
      r.fail(n, "redis_connections", "must be shared or per_thread, got \"" + v + "\"");
    }
    c.redis_connection_per_thread = v == "per_thread";
  }
  if (auto n = root["memory_max_keys"]) {
    c.memory_max_keys = r.integer<std::size_t>(n, "memory_max_keys", 1, 1'000'000'000);
  }
  if (auto n = root["deny_status"]) c.deny_status = r.integer<unsigned>(n, "deny_status", 400, 499);
  if (auto n = root["trusted_proxies"]) {
    const auto texts = r.strings(n, "trusted_proxies");
    for (std::size_t i = 0; i < texts.size(); ++i) {
      std::string why;
      if (texts[i].find_first_of(" \t") != std::string::npos)
        r.fail(n[i], "trusted_proxies[" + std::to_string(i) + "]", "must not contain spaces");
      auto range = http::parse_cidr(texts[i], &why);
      if (!range) r.fail(n[i], "trusted_proxies[" + std::to_string(i) + "]", why);
      c.keys.trusted_proxies.push_back(*range);
    }
  }
  if (auto n = root["forwarded_header"]) {
    const auto s = r.string(n, "forwarded_header");
    auto h = http::parse_forwarded_header(s);
    if (!h) {
      r.fail(n, "forwarded_header",
             "must be x-forwarded-for, forwarded or forwarded-then-x-forwarded-for");
    }
    c.keys.header = *h;
  }
  if (auto n = root["ipv6_prefix"])
    c.keys.ipv6_prefix = r.integer<unsigned>(n, "ipv6_prefix", 1, 128);
  if (auto n = root["ipv4_prefix"])
    c.keys.ipv4_prefix = r.integer<unsigned>(n, "ipv4_prefix", 1, 32);
  if (auto n = root["limits"]) {
    r.expect_map(n, "limits");
    r.only_keys(n, "limits",
                {"max_body_bytes", "max_header_bytes", "idle_timeout_ms", "request_head_timeout_ms",
                 "shutdown_timeout_ms", "max_connections"});
    if (auto v = n["max_body_bytes"]) {
      c.limits.max_body_bytes = r.integer<std::size_t>(v, "limits.max_body_bytes", 64, 1 << 20);
    }
    if (auto v = n["max_header_bytes"]) {
      c.limits.max_header_bytes =
          r.integer<std::size_t>(v, "limits.max_header_bytes", 512, 1 << 20);
    }
    if (auto v = n["idle_timeout_ms"]) {
      c.limits.idle_timeout =
          std::chrono::milliseconds{r.integer<int>(v, "limits.idle_timeout_ms", 100, 3'600'000)};
    }
    if (auto v = n["request_head_timeout_ms"]) {
      c.limits.request_head_timeout = std::chrono::milliseconds{
          r.integer<int>(v, "limits.request_head_timeout_ms", 100, 3'600'000)};
    }
    if (auto v = n["max_connections"]) {
      c.limits.max_connections = r.integer<std::size_t>(v, "limits.max_connections", 1, 1'000'000);
    }
    if (auto v = n["shutdown_timeout_ms"]) {
      c.limits.shutdown_timeout =
          std::chrono::milliseconds{r.integer<int>(v, "limits.shutdown_timeout_ms", 0, 3'600'000)};
    }
  }

  if (auto n = root["admin"]) parse_admin(r, n, c.admin);
  if (auto n = root["envoy_rls"]) parse_envoy_rls(r, n, c.envoy_rls);

  auto pols = root["policies"];
  if (!pols) r.fail(root, "policies", "is required (at least one policy)");
  r.expect_map(pols, "policies");
  if (pols.size() == 0) r.fail(pols, "policies", "at least one policy is required");
  for (const auto& kv : pols) {
    const auto name = r.string(kv.first, "policies");
    if (!http::is_valid_name(name)) {
      r.fail(kv.first, "policies." + name, "names must be 1..64 characters of A-Z a-z 0-9 _ . -");
    }
    if (is_concurrency(kv.second)) {
      concurrency_policy cp;
      parse_concurrency_policy(r, kv.second, "policies." + name, c.on_backend_failure, cp);
      c.concurrency_policies.emplace(name, cp);
      continue;
    }
    policy p;
    parse_policy(r, kv.second, "policies." + name, c.on_backend_failure, p);
    c.policies.emplace(name, p);
  }

  if (auto rules = root["rules"]) {
    if (!rules.IsSequence()) r.fail(rules, "rules", "must be a list");
    std::set<std::string> names;
    for (std::size_t i = 0; i < rules.size(); ++i) {
      const auto field = "rules[" + std::to_string(i) + "]";
      http::rule rule;
      parse_rule(r, rules[i], field, c, rule);
      if (!names.insert(rule.name).second) {
        r.fail(rules[i]["name"], field + ".name", "duplicate rule name \"" + rule.name + "\"");
      }
      c.rules.push_back(std::move(rule));
    }
  }
  // The middleware validates the whole set once more (e.g. cross-field limits); anything it
  // still rejects is reported at the rules (or policies) block.
  try {
    http::rule_set check(c.policies, c.rules, c.keys);
  } catch (const std::invalid_argument& e) {
    auto at = root["rules"] ? root["rules"] : pols;
    r.fail(at, root["rules"] ? "rules" : "policies", e.what());
  }
  return c;
}

}  // namespace

config parse_config(std::string_view yaml, std::string source) {
  reader r(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    throw config_error(source, e.mark.line < 0 ? 0 : e.mark.line + 1, "", "invalid YAML: " + e.msg);
  }
  try {
    return parse_root(r, root);
  } catch (const YAML::Exception& e) {
    // e.g. a duplicate or malformed node deep inside; keep the file:line shape.
    throw config_error(source, e.mark.line < 0 ? 0 : e.mark.line + 1, "", e.msg);
  }
}

config load_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw config_error(path, 0, "", "cannot read the file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

}  // namespace sluice::daemon
