#pragma once
// The daemon's configuration: parsed once from YAML, validated, then immutable. A reload
// parses a whole new config and swaps it in; nothing here changes while serving.
// The schema (these structs, their defaults, config_error) is defined in config.cpp; the YAML
// reader (parse_config, load_config_file), which checks each field where it reads it so that
// an error names its line, in config_yaml.cpp.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/concurrency.hpp>
#include <sluice/http/client_ip.hpp>
#include <sluice/http/rules.hpp>
#include <sluice/policy.hpp>

#include "grpc/options.hpp"

namespace sluice::envoy {
struct rls_config;
}

namespace sluice::daemon {

/// What a ShouldRateLimit call answers when the backend fails (`envoy_rls.on_backend_failure`).
enum class rls_failure_mode {
  /// gRPC UNAVAILABLE (HTTP 503 for POST /json): Envoy then applies its own
  /// `failure_mode_deny` (allow by default, deny when set).
  unavailable,
  open,    ///< every limit allows (OK), as the failure mode `open` of a policy
  closed,  ///< every limit denies (OVER_LIMIT)
  local,   ///< decided by this process's memory backend
};

/// `unavailable`, `open`, `closed` or `local`.
std::string_view to_string(rls_failure_mode m) noexcept;

/// Envoy's rate limit service (the `envoy_rls:` section): a gRPC listener serving
/// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit with limits from config files
/// in the reference service's format, and POST /json on the HTTP listener. Off unless the
/// config has the section.
struct envoy_rls_config {
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8081;
  /// As the config wrote them: files, or directories whose *.yaml / *.yml files are read;
  /// relative paths are relative to the config file's directory.
  std::vector<std::string> config;
  rls_failure_mode on_backend_failure = rls_failure_mode::unavailable;
  /// Several files naming one domain add to it (otherwise a duplicate domain is an error).
  bool merge_domains = false;
  /// Descriptors in one request (`max_descriptors`) and entries in one descriptor
  /// (`max_descriptor_entries`): a request over either is answered INVALID_ARGUMENT before
  /// any matching, so one call's work stays bounded. Envoy sends one descriptor per
  /// rate_limits action set, each with a few entries.
  std::uint32_t max_descriptors = 256;
  std::uint32_t max_descriptor_entries = 64;
  /// The most (domain, descriptor) series of the per-descriptor metrics (five series each).
  /// A descriptor's stat key can carry request data (value_to_metric, detailed_metric, a
  /// request's `limit` override), so past this a new one is counted in its domain's
  /// `descriptor="__overflow__"` series and in sluice_metric_series_dropped_total.
  std::size_t max_metric_series = 10'000;
  /// As the reference's SHADOW_MODE: every limit is decided and counted as usual (statuses
  /// say OVER_LIMIT where over) but the overall code is always OK. Applies on reload.
  bool shadow_mode = false;
  /// As the reference's LIMIT_RESPONSE_HEADERS_ENABLED: response_headers_to_add carries the
  /// limit, remaining and reset (whole seconds) of the descriptor closest to its limit.
  struct response_headers_config {
    bool enabled = false;
    std::string limit = "RateLimit-Limit";          ///< the reference's LIMIT_LIMIT_HEADER
    std::string remaining = "RateLimit-Remaining";  ///< LIMIT_REMAINING_HEADER
    std::string reset = "RateLimit-Reset";          ///< LIMIT_RESET_HEADER
  } response_headers;
  /// As the reference's LIMIT_REQUEST_HEADERS_ENABLED: the same three values (of the same
  /// status) in request_headers_to_add, which Envoy adds to the request it forwards upstream;
  /// names as LIMIT_REQUEST_{LIMIT,REMAINING,RESET}_HEADER. Applies on reload.
  response_headers_config request_headers;
  /// As the reference's LIMIT_PER_UNIT_HEADERS_ENABLED: per unit of the statuses with a
  /// limit, `RateLimit-Limit-<Unit>s` and `RateLimit-Remaining-<Unit>s` of the one with the
  /// least room, in response_headers_to_add (before the three above). Applies on reload.
  bool per_unit_headers = false;
  /// As the reference's QUOTA_MODE: every descriptor is in quota mode (as if each limit had
  /// `quota_mode: true`). Applies on reload.
  bool quota_mode = false;
  /// TLS on the gRPC listener (`tls:`): off while `cert_file` is empty. The paths are as the
  /// config wrote them; the PEM contents are read at load. A reload (and a change of the
  /// files on disk, which the listener watches) puts new credentials in force for the next
  /// connections; turning TLS on or off takes a restart.
  struct tls_config {
    std::string cert_file;
    std::string key_file;
    /// Set: clients must present a certificate this CA signed (mutual TLS).
    std::string client_ca_file;
    /// The three paths resolved beside the config file (what is read and watched).
    std::string cert_path;
    std::string key_path;
    std::string client_ca_path;
    /// As the reference's GRPC_CLIENT_TLS_SAN: a subject alternative name the verified
    /// client certificate must carry (a DNS name, an IP address, or a URI such as
    /// `spiffe://...`); empty: any certificate the CA signed. Needs client_ca_file.
    std::string client_san;
    std::string cert_pem;
    std::string key_pem;  ///< never logged
    std::string client_ca_pem;
    bool enabled() const noexcept { return !cert_file.empty(); }
  } tls;
  /// What one client can hold of the gRPC listener (HTTP/2), whatever it sends
  /// (docs/ENVOY.md, "Limits"). Read when the listener starts; a reload keeps them.
  struct transport_config {
    /// Open connections at most; one more is closed as soon as it is accepted.
    std::size_t max_connections = 1024;
    /// Streams, header list, CONTINUATIONs, message size, stream resets, timeouts and
    /// output per connection, with their defaults.
    grpc::connection_options connection;
    bool operator==(const transport_config&) const = default;
  } transport;
  /// The limits loaded from `config` (at load and at every reload); null: the section is absent.
  std::shared_ptr<const envoy::rls_config> limits;

  bool enabled() const noexcept { return limits != nullptr; }
  /// "host:port", with brackets around an IPv6 host.
  std::string listen() const;
};

/// Request-size limits, timeouts and connection bounds of the HTTP server: what one client
/// can hold of the daemon, whatever it sends.
struct limits_config {
  std::size_t max_body_bytes = 8 * 1024;
  std::size_t max_header_bytes = 8 * 1024;
  /// How long a connection may wait for the first byte of its next request (keep-alive), and
  /// for its response to be taken (a write).
  std::chrono::milliseconds idle_timeout{30'000};
  /// From a request's first byte to the end of its head (request line and headers), and
  /// again from there to the end of its body: a client that trickles bytes is closed then.
  std::chrono::milliseconds request_head_timeout{10'000};
  /// Open connections at most, all clients together; one more is closed as soon as it is
  /// accepted (counted, logged once per burst) and the open ones are served as before.
  /// sluiced raises its open-file limit to fit this when the system allows.
  std::size_t max_connections = 4096;
  std::chrono::milliseconds shutdown_timeout{10'000};  ///< SIGTERM drain deadline
};

/// The admin endpoints (/v1/reset, /v1/refund, /v1/penalize, /v1/block): off unless the
/// config names a token file.
struct admin_config {
  /// As the config wrote it; empty: the admin endpoints are off (404).
  std::string token_file;
  /// The token read from it at load (and at every reload). Never logged.
  std::string token;
  bool enabled() const noexcept { return !token.empty(); }
};

struct config {
  std::string source = "<default>";  ///< the file it came from
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
  unsigned threads = 0;  ///< 0: one per CPU core
  std::string log_level = "info";
  /// `memory` or a redis://, redis+cluster:// or redis+sentinel:// URL
  std::string backend = "memory";
  std::string key_prefix = "sluice:";
  failure_mode on_backend_failure = failure_mode::open;
  std::chrono::milliseconds backend_timeout{50};
  std::chrono::milliseconds backend_connect_timeout{250};
  /// Standalone Redis: `shared`, one connection for all server threads (checks that arrive
  /// together share script calls: the least Redis CPU per check), or `per_thread`, one
  /// connection per server thread run by that thread (no hand-off between threads: more
  /// checks/s from one daemon and lower latency, at more Redis CPU per check).
  bool redis_connection_per_thread = false;
  std::size_t memory_max_keys = 1'000'000;
  unsigned deny_status = 429;
  /// trusted_proxies, forwarded_header, ipv6_prefix, ipv4_prefix
  http::key_options keys;
  std::map<std::string, policy, std::less<>> policies;
  /// Concurrency limits: the `policies:` entries with `algorithm: concurrency`, served by
  /// /v1/acquire, /v1/release and /v1/renew (never by /v1/check or the rules). Their names
  /// are not in `policies`.
  std::map<std::string, concurrency_policy, std::less<>> concurrency_policies;
  std::vector<http::rule> rules;
  limits_config limits;
  admin_config admin;
  envoy_rls_config envoy_rls;

  /// "host:port", with brackets around an IPv6 host.
  std::string listen() const;
};

/// `url` fit for a log line: the password of its user info and the value of any query
/// option whose name ends in `password` replaced by `***`.
std::string redacted_url(std::string_view url);

/// A config that cannot be used; what() is `FILE:LINE: field: message`.
class config_error : public std::runtime_error {
 public:
  config_error(std::string file, int line, std::string field, std::string message);
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }  ///< 1-based; 0 when unknown
  const std::string& field() const noexcept { return field_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string file_;
  int line_;
  std::string field_;
  std::string message_;
};

/// The config used without --config: memory backend, one policy `default` (capacity 10,
/// refill 1/s), one rule keying every path by client IP, loopback trusted as a proxy.
config default_config();

/// Parses and validates YAML text; `source` names it in errors. Throws config_error.
config parse_config(std::string_view yaml, std::string source);

/// Reads and parses a file. Throws config_error (also when it cannot be read).
config load_config_file(const std::string& path);

/// Parses "host:port" / "[v6]:port" into the config's listen fields. Throws
/// std::invalid_argument with a message.
void parse_listen(std::string_view text, config& c);

}  // namespace sluice::daemon
