#pragma once
// The daemon's Prometheus metrics, declared once here (names are listed in docs/daemon.md).
// prometheus-cpp (Debian prometheus-cpp-dev) keeps the registry and writes the text
// exposition format; the daemon serves it on GET /metrics itself.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/backend.hpp>
#include <sluice/limiter.hpp>
#include <sluice/policy.hpp>

namespace prometheus {
class Registry;
}

namespace sluice::daemon {

/// Thread-safe.
class metrics {
 public:
  metrics();
  ~metrics();
  metrics(const metrics&) = delete;
  metrics& operator=(const metrics&) = delete;

  /// One decision: `endpoint` is `check`, `peek` or `auth`, `rule` is empty for /v1/check,
  /// `result` is `allowed`, `denied`, `shadow_denied` or `skipped`.
  void decision(std::string_view endpoint, std::string_view policy, std::string_view rule,
                std::string_view result);
  /// A decision made by `mode` because the backend failed.
  void degraded(failure_mode mode, std::string_view policy);
  /// A backend error (the `error` label is the errc's short name, e.g. `timeout`).
  void backend_error(std::error_code ec);
  /// How long one limiter check took (validation, backend round trip, failure mode).
  void backend_latency(std::chrono::steady_clock::duration d);
  /// One HTTP request answered.
  void request(std::string_view endpoint, unsigned status, std::chrono::steady_clock::duration d);
  /// One call of an admin endpoint (`endpoint`: `reset`, `refund`, `penalize`, `block`),
  /// allowed or refused: `outcome` is `ok`, `unauthorized`, `forbidden`, `invalid` or
  /// `backend_error`.
  void admin_request(std::string_view endpoint, std::string_view outcome);
  /// A SIGHUP reload attempt.
  void reload(bool ok);
  /// Whether the last readiness probe reached the backend.
  void backend_up(bool up);
  /// A connection accepted and served / ended (the `sluice_connections_open` gauge).
  void connection_opened();
  void connection_closed();
  /// A connection closed at once because `limits.max_connections` were open.
  void connection_rejected();
  /// A connection closed because a request's `phase` (`head` or `body`) did not arrive in
  /// time (`limits.request_head_timeout_ms`).
  void read_timeout(std::string_view phase);
  /// An exception caught while serving (`where`: `request` answered 500, `io` in the
  /// server's own code, the connection closed): a bug, never input the daemon rejects.
  void internal_error(std::string_view where);

  /// What one descriptor of an Envoy RLS request (ShouldRateLimit, POST /json) did, under
  /// the reference service's stat names: `domain`, and `descriptor` the reference's stat key
  /// of the matched limit ("domain.key_value..."). `hits` counted in total_hits and in one
  /// of over_limit / within_limit; `near` of the within hits were past 80 % of the limit;
  /// `shadow`: over the limit and let through by shadow mode (the limit's or the service's).
  void rls_descriptor(std::string_view domain, std::string_view descriptor, std::uint64_t hits,
                      bool over, std::uint64_t near, bool shadow);
  /// The most (domain, descriptor) series rls_descriptor() creates (each is one series of
  /// each of its five families); past it, a new descriptor is counted in its domain's
  /// `descriptor="__overflow__"` series and in sluice_metric_series_dropped_total. Series
  /// already made stay. Default 10,000 (envoy_rls.max_metric_series).
  void set_max_rls_series(std::size_t n) noexcept;
  /// The descriptor label of the series past set_max_rls_series().
  static constexpr std::string_view overflow_label = "__overflow__";

  /// An Envoy RLS request over the limit answered OK because of `envoy_rls.shadow_mode`
  /// (the reference's global_shadow_mode).
  void rls_global_shadow_mode();
  /// An Envoy RLS request that got no decision: `kind` is `redis_error` (the backend failed
  /// with the failure mode `unavailable`) or `service_error` (an invalid request).
  void rls_error(std::string_view domain, std::string_view kind);
  /// One Envoy RLS call answered: `transport` `grpc` or `json`, `code` the overall code
  /// (`ok`, `over_limit`) or the error (`unavailable`, `invalid_argument`, `disabled`).
  void rls_call(std::string_view transport, std::string_view code,
                std::chrono::steady_clock::duration d);

  /// The backend's own counters as of now (before a scrape): its gauges are set, its
  /// counters advance by what they grew since the last call (a backend replaced by a reload
  /// starts again from zero: its whole count is added).
  void backend_counters(const backend_stats& s);
  /// The limiters' counters that sluiced does not count itself, at a scrape, exported as
  /// backend_counters() exports the backend's (the library counts, the daemon exports).
  void limiter_counters(const limiter_stats& s);
  /// Quota leases per policy (runtime::lease_stats_by_policy), at a scrape, exported as
  /// limiter_counters() exports its counters.
  void lease_counters(const std::vector<std::pair<std::string, lease_stats>>& by_policy);

  /// What a concurrency limit's step did under `policy` (slot_metrics.cpp): `event` is
  /// `acquired`, `refused`, `released` or `renew_failed`; `in_flight` is the holders the
  /// backend reported after it (the sluice_slots_in_flight gauge: the last one seen).
  void slot_event(std::string_view policy, std::string_view event, std::uint64_t in_flight);

  /// The text exposition format (version 0.0.4). Label values are printable UTF-8: bytes
  /// that are not (controls, invalid UTF-8) show as `\xNN` and a backslash as `\\`, as in
  /// sluiced's log lines.
  std::string serialize() const;

  /// The short label for a backend error code.
  static std::string error_label(std::error_code ec);

 private:
  struct families;
  std::atomic<std::size_t> max_rls_series_{10'000};
  std::mutex backend_mu_;  // guards last_backend_, last_limiter_ and last_leases_
  backend_stats last_backend_;
  limiter_stats last_limiter_;
  std::map<std::string, lease_stats, std::less<>> last_leases_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<families> f_;
  // The concurrency limits' families, registered on first use (slot_metrics.cpp).
  struct slot_families;
  std::once_flag slots_once_;
  std::shared_ptr<slot_families> slots_;
};

}  // namespace sluice::daemon
