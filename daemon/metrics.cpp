#include "metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <charconv>
#include <limits>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <sluice/error.hpp>

#include "core/string_hash.hpp"
#include "safe_log.hpp"

namespace sluice::daemon {

namespace {
double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

using sluice::detail::string_hash;

// The label values of one series joined into one lookup key ('\x1f' cannot occur in a
// policy, rule or endpoint name). One buffer per thread, so a hit allocates nothing.
template <class... Values>
std::string_view series_key(const Values&... values) {
  thread_local std::string key;
  key.clear();
  ((key.append(values), key.push_back('\x1f')), ...);
  return key;
}

// A label value as the exposition shows it: printable UTF-8, whatever bytes a client sent
// (an Envoy descriptor value may hold NUL or ESC). safe_log's escaping, so a label and a
// log line show one value alike; it is one-to-one, so two values never share a series.
std::string label(std::string_view v) { return is_printable(v) ? std::string(v) : printable(v); }

// Moves a counter exported from someone else's count (`now`, `before` at the last scrape)
// forward; a count that went down was replaced (a reload's new backend), so all of it is new.
void advance(prometheus::Counter& c, std::uint64_t now, std::uint64_t before) {
  c.Increment(static_cast<double>(now >= before ? now - before : now));
}

// Family::Add locks the family and builds a std::map of label strings on every call, which
// on the request path cost more than the decision itself. Series are never removed, so a
// pointer found once stays valid: look it up under a shared lock, add it once.
template <class Metric>
class series_cache {
 public:
  template <class Add>
  Metric& get(std::string_view key, Add&& add) {
    return *find_or_add(key, std::numeric_limits<std::size_t>::max(), std::forward<Add>(add));
  }

  // As get(), but null when `key` is new and `max_series` keys are held already: label values
  // that come from requests must not grow the exposition (and this map) without bound.
  template <class Add>
  Metric* find_or_add(std::string_view key, std::size_t max_series, Add&& add) {
    {
      std::shared_lock lock(mu_);
      if (auto it = series_.find(key); it != series_.end()) return it->second;
    }
    std::unique_lock lock(mu_);
    if (auto it = series_.find(key); it != series_.end()) return it->second;
    if (series_.size() >= max_series) return nullptr;
    Metric* m = &add();
    series_.emplace(std::string(key), m);
    return m;
  }

 private:
  std::shared_mutex mu_;
  std::unordered_map<std::string, Metric*, string_hash, std::equal_to<>> series_;
};
}  // namespace

struct metrics::families {
  prometheus::Family<prometheus::Counter>& decisions;
  prometheus::Family<prometheus::Counter>& degraded;
  prometheus::Family<prometheus::Counter>& backend_errors;
  prometheus::Family<prometheus::Histogram>& backend_latency;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& request_latency;
  prometheus::Family<prometheus::Counter>& reloads;
  prometheus::Family<prometheus::Gauge>& backend_up;
  prometheus::Family<prometheus::Gauge>& connections_open;
  prometheus::Family<prometheus::Counter>& connections_rejected;
  prometheus::Family<prometheus::Counter>& read_timeouts;
  prometheus::Family<prometheus::Counter>& internal_errors;
  prometheus::Family<prometheus::Gauge>& backend_in_flight;
  prometheus::Family<prometheus::Gauge>& backend_connected;
  prometheus::Family<prometheus::Counter>& script_calls;
  prometheus::Family<prometheus::Counter>& other_script_calls;
  prometheus::Family<prometheus::Counter>& batched_decisions;
  prometheus::Family<prometheus::Counter>& noscript;
  prometheus::Family<prometheus::Counter>& cluster_redirects;
  prometheus::Family<prometheus::Counter>& cluster_refreshes;
  prometheus::Family<prometheus::Counter>& cluster_cross_slot;
  prometheus::Family<prometheus::Counter>& cluster_refunds;
  prometheus::Family<prometheus::Counter>& sentinel_failovers;
  prometheus::Family<prometheus::Counter>& admin_requests;
  // Envoy RLS, per domain and descriptor, as the reference service's stats (statsd names
  // ratelimit.service.rate_limit.<domain>.<descriptor>.<stat> with dots as underscores).
  prometheus::Family<prometheus::Counter>& rls_total_hits;
  prometheus::Family<prometheus::Counter>& rls_over_limit;
  prometheus::Family<prometheus::Counter>& rls_near_limit;
  prometheus::Family<prometheus::Counter>& rls_within_limit;
  prometheus::Family<prometheus::Counter>& rls_shadow_mode;
  prometheus::Family<prometheus::Counter>& rls_global_shadow_mode;
  prometheus::Family<prometheus::Counter>& rls_redis_error;
  prometheus::Family<prometheus::Counter>& rls_service_error;
  prometheus::Family<prometheus::Counter>& rls_calls;
  prometheus::Family<prometheus::Histogram>& rls_call_latency;
  prometheus::Family<prometheus::Counter>& series_dropped;
  prometheus::Family<prometheus::Gauge>& memory_keys;
  prometheus::Family<prometheus::Counter>& memory_evicted_live;
  prometheus::Family<prometheus::Counter>& cached_denials_evicted;
  prometheus::Family<prometheus::Counter>& cached_denials;
  prometheus::Family<prometheus::Counter>& leases;
  prometheus::Family<prometheus::Counter>& lease_units;
  prometheus::Family<prometheus::Counter>& leased_decisions;
  // Latencies from 100 us (memory, local Redis) to 2.5 s (far beyond any sane timeout).
  const prometheus::Histogram::BucketBoundaries buckets{
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  // The series written on every request.
  series_cache<prometheus::Counter> decision_series{};
  series_cache<prometheus::Counter> request_series{};
  series_cache<prometheus::Histogram> request_latency_series{};
  struct rls_series {
    prometheus::Counter* total_hits;
    prometheus::Counter* over_limit;
    prometheus::Counter* near_limit;
    prometheus::Counter* within_limit;
    prometheus::Counter* shadow_mode;
  };
  series_cache<rls_series> rls_descriptor_series{};
  // One `__overflow__` series per domain (domains come from the config, not from requests).
  series_cache<rls_series> rls_overflow_series{};
  prometheus::Counter* rls_series_dropped = nullptr;
  std::mutex rls_series_mu{};
  std::vector<std::unique_ptr<rls_series>> rls_series_store{};
  series_cache<prometheus::Counter> rls_call_series{};
  series_cache<prometheus::Histogram> rls_call_latency_series{};
  prometheus::Histogram* backend_latency_series = nullptr;
  prometheus::Counter* rls_global_shadow_mode_series = nullptr;
};

metrics::metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  auto& r = *registry_;
  f_.reset(new families{
      prometheus::BuildCounter()
          .Name("sluice_decisions_total")
          .Help("Rate-limit decisions by endpoint, policy, rule and result")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_degraded_decisions_total")
          .Help("Decisions made by a failure mode because the backend failed")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_backend_errors_total")
          .Help("Backend errors by kind")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("sluice_backend_check_duration_seconds")
          .Help("Time of one limiter check, backend round trip and failure mode included")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_http_requests_total")
          .Help("HTTP requests answered, by endpoint and status code")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("sluice_http_request_duration_seconds")
          .Help("Time from a complete request to its response being queued, by endpoint")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_config_reloads_total")
          .Help("Config reloads (SIGHUP) by result")
          .Register(r),
      prometheus::BuildGauge()
          .Name("sluice_backend_up")
          .Help("1 when the last readiness probe reached the backend, else 0")
          .Register(r),
      prometheus::BuildGauge()
          .Name("sluice_connections_open")
          .Help("HTTP connections open now")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_connections_rejected_total")
          .Help("Connections closed on accept because limits.max_connections were open")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_request_read_timeouts_total")
          .Help("Connections closed because a request head or body did not arrive in time")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_internal_errors_total")
          .Help("Exceptions caught while serving (a bug): request answered 500, io closed")
          .Register(r),
      prometheus::BuildGauge()
          .Name("sluice_backend_in_flight")
          .Help("Redis decisions accepted and not yet completed")
          .Register(r),
      prometheus::BuildGauge()
          .Name("sluice_backend_connected")
          .Help("1 when the backend is connected (Cluster: a slot map is known), else 0")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_script_calls_total")
          .Help("Decision script calls sent to Redis (a batch counts once)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_other_script_calls_total")
          .Help("Other script calls sent to Redis: multi-key decisions, quota leases and "
                "their returns, slot steps, Cluster redirections followed and refunds")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_batched_decisions_total")
          .Help("Decisions the script calls carried")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_noscript_total")
          .Help("NOSCRIPT answers (the script's source sent again)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_cluster_redirects_total")
          .Help("Redis Cluster redirections followed, by kind")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_cluster_slot_map_refreshes_total")
          .Help("Redis Cluster slot map refreshes, by result")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_cluster_cross_slot_total")
          .Help("Multi-key decisions whose keys were on several slots (decided slot by slot)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_cluster_refunds_total")
          .Help("Refunds for slot groups spent in vain, by result")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_redis_sentinel_failovers_total")
          .Help("Times the Sentinel backend moved to another master")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_admin_requests_total")
          .Help("Admin endpoint calls (reset, refund, penalize, block) by endpoint and outcome")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_rate_limit_total_hits_total")
          .Help("Envoy RLS: hits of each matched limit, by domain and descriptor")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_rate_limit_over_limit_total")
          .Help("Envoy RLS: hits over the limit, by domain and descriptor")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_rate_limit_near_limit_total")
          .Help("Envoy RLS: hits within the limit past 80 % of it, by domain and descriptor")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_rate_limit_within_limit_total")
          .Help("Envoy RLS: hits within the limit, by domain and descriptor")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_rate_limit_shadow_mode_total")
          .Help("Envoy RLS: hits a shadow-mode limit would have denied, by domain and descriptor")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_global_shadow_mode_total")
          .Help("Envoy RLS: calls over the limit answered OK because of envoy_rls.shadow_mode")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_call_should_rate_limit_redis_error_total")
          .Help("Envoy RLS: calls answered UNAVAILABLE because the backend failed, by domain")
          .Register(r),
      prometheus::BuildCounter()
          .Name("ratelimit_service_call_should_rate_limit_service_error_total")
          .Help("Envoy RLS: calls refused as invalid (e.g. an empty domain), by domain")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_rls_calls_total")
          .Help("Envoy RLS calls answered, by transport (grpc, json) and code")
          .Register(r),
      prometheus::BuildHistogram()
          .Name("sluice_rls_call_duration_seconds")
          .Help("Envoy RLS: time from a decoded request to its answer, by transport")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_metric_series_dropped_total")
          .Help("Updates whose new label values were counted in the __overflow__ series "
                "instead (envoy_rls.max_metric_series reached), by family")
          .Register(r),
      prometheus::BuildGauge()
          .Name("sluice_memory_keys")
          .Help("Keys the memory backend holds (at most memory_max_keys)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_memory_evicted_live_total")
          .Help("Keys the memory backend forgot while they still limited (memory_max_keys "
                "reached): each started over with a full limit")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_cached_denials_evicted_total")
          .Help("Denials the over-limit cache (cache_denials) forgot before they lapsed, to "
                "make room: each costs that key's next check a backend call, nothing more")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_cached_denials_total")
          .Help("Checks the over-limit cache (cache_denials) denied in-process, without a "
                "backend call (the limiter's count; they are denials in sluice_decisions_total)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_leases_total")
          .Help("Quota leases asked of the backend (policies with lease_ttl), by result: "
                "granted, or denied (the limit used up)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_lease_units_total")
          .Help("Units of quota leases: leased (granted), expired (a lease ended with them "
                "unspent) and returned (of those, given back to the backend)")
          .Register(r),
      prometheus::BuildCounter()
          .Name("sluice_leased_decisions_total")
          .Help("Checks decided in-process from quota leases, without a backend call (also "
                "counted in sluice_decisions_total)")
          .Register(r),
  });
  // Present from the start, so dashboards see zeros rather than nothing.
  f_->backend_latency_series = &f_->backend_latency.Add({}, f_->buckets);
  f_->rls_global_shadow_mode_series = &f_->rls_global_shadow_mode.Add({});
  f_->rls_series_dropped = &f_->series_dropped.Add({{"family", "rls_descriptor"}});
  f_->reloads.Add({{"result", "success"}});
  f_->reloads.Add({{"result", "failure"}});
  f_->backend_up.Add({}).Set(1);
  f_->connections_open.Add({});
  f_->connections_rejected.Add({{"reason", "max_connections"}});
  f_->read_timeouts.Add({{"phase", "head"}});
  f_->read_timeouts.Add({{"phase", "body"}});
  f_->internal_errors.Add({{"where", "request"}});
  f_->internal_errors.Add({{"where", "io"}});
  backend_counters(backend_stats{});
  limiter_counters(limiter_stats{});
}

metrics::~metrics() = default;

void metrics::decision(std::string_view endpoint, std::string_view policy, std::string_view rule,
                       std::string_view result) {
  f_->decision_series
      .get(series_key(endpoint, policy, rule, result),
           [&]() -> prometheus::Counter& {
             return f_->decisions.Add({{"endpoint", std::string(endpoint)},
                                       {"policy", label(policy)},
                                       {"rule", label(rule)},
                                       {"result", std::string(result)}});
           })
      .Increment();
}

void metrics::degraded(failure_mode mode, std::string_view policy) {
  f_->degraded.Add({{"mode", std::string(to_string(mode))}, {"policy", label(policy)}}).Increment();
}

std::string metrics::error_label(std::error_code ec) {
  if (ec.category() == error_category()) {
    switch (static_cast<errc>(ec.value())) {
      case errc::backend_timeout:
        return "timeout";
      case errc::backend_unavailable:
        return "unavailable";
      case errc::backend_protocol_error:
        return "protocol_error";
      case errc::backend_script_error:
        return "script_error";
      case errc::backend_overloaded:
        return "overloaded";
      case errc::backend_shutting_down:
        return "shutting_down";
      default:
        break;
    }
  }
  return "other";
}

void metrics::backend_error(std::error_code ec) {
  f_->backend_errors.Add({{"error", error_label(ec)}}).Increment();
}

void metrics::backend_latency(std::chrono::steady_clock::duration d) {
  f_->backend_latency_series->Observe(seconds(d));
}

void metrics::request(std::string_view endpoint, unsigned status,
                      std::chrono::steady_clock::duration d) {
  char code[12];
  const auto end = std::to_chars(code, code + sizeof code, status).ptr;
  const std::string_view code_sv(code, static_cast<std::size_t>(end - code));
  f_->request_series
      .get(series_key(endpoint, code_sv),
           [&]() -> prometheus::Counter& {
             return f_->requests.Add(
                 {{"endpoint", std::string(endpoint)}, {"code", std::string(code_sv)}});
           })
      .Increment();
  f_->request_latency_series
      .get(series_key(endpoint),
           [&]() -> prometheus::Histogram& {
             return f_->request_latency.Add({{"endpoint", std::string(endpoint)}}, f_->buckets);
           })
      .Observe(seconds(d));
}

void metrics::admin_request(std::string_view endpoint, std::string_view outcome) {
  // Rare (an operator's calls): no series cache.
  f_->admin_requests.Add({{"endpoint", std::string(endpoint)}, {"outcome", std::string(outcome)}})
      .Increment();
}

void metrics::set_max_rls_series(std::size_t n) noexcept {
  max_rls_series_.store(n, std::memory_order_relaxed);
}

void metrics::rls_descriptor(std::string_view domain, std::string_view descriptor,
                             std::uint64_t hits, bool over, std::uint64_t near, bool shadow) {
  // A descriptor's stat key may carry request data (value_to_metric, detailed_metric, a
  // request's own `limit`): past the cap, new keys are counted in one series per domain.
  const auto add = [&](std::string_view shown) -> families::rls_series& {
    const prometheus::Labels labels{{"domain", label(domain)}, {"descriptor", label(shown)}};
    auto s = std::make_unique<families::rls_series>(
        families::rls_series{&f_->rls_total_hits.Add(labels), &f_->rls_over_limit.Add(labels),
                             &f_->rls_near_limit.Add(labels), &f_->rls_within_limit.Add(labels),
                             &f_->rls_shadow_mode.Add(labels)});
    std::lock_guard lock(f_->rls_series_mu);
    f_->rls_series_store.push_back(std::move(s));
    return *f_->rls_series_store.back();
  };
  auto* series = f_->rls_descriptor_series.find_or_add(
      series_key(domain, descriptor), max_rls_series_.load(std::memory_order_relaxed),
      [&]() -> families::rls_series& { return add(descriptor); });
  if (series == nullptr) {
    f_->rls_series_dropped->Increment();
    series = &f_->rls_overflow_series.get(
        series_key(domain), [&]() -> families::rls_series& { return add(overflow_label); });
  }
  const auto h = static_cast<double>(hits);
  series->total_hits->Increment(h);
  (over ? series->over_limit : series->within_limit)->Increment(h);
  if (near) series->near_limit->Increment(static_cast<double>(near));
  if (shadow) series->shadow_mode->Increment(h);
}

void metrics::rls_global_shadow_mode() { f_->rls_global_shadow_mode_series->Increment(); }

void metrics::rls_error(std::string_view domain, std::string_view kind) {
  // Rare (a failing backend, a broken client): no series cache.
  auto& family = kind == "redis_error" ? f_->rls_redis_error : f_->rls_service_error;
  family.Add({{"domain", label(domain)}}).Increment();
}

void metrics::rls_call(std::string_view transport, std::string_view code,
                       std::chrono::steady_clock::duration d) {
  f_->rls_call_series
      .get(series_key(transport, code),
           [&]() -> prometheus::Counter& {
             return f_->rls_calls.Add(
                 {{"transport", std::string(transport)}, {"code", std::string(code)}});
           })
      .Increment();
  f_->rls_call_latency_series
      .get(series_key(transport),
           [&]() -> prometheus::Histogram& {
             return f_->rls_call_latency.Add({{"transport", std::string(transport)}}, f_->buckets);
           })
      .Observe(seconds(d));
}

void metrics::reload(bool ok) {
  f_->reloads.Add({{"result", ok ? "success" : "failure"}}).Increment();
}

void metrics::backend_up(bool up) { f_->backend_up.Add({}).Set(up ? 1 : 0); }

void metrics::connection_opened() { f_->connections_open.Add({}).Increment(); }

void metrics::connection_closed() { f_->connections_open.Add({}).Decrement(); }

void metrics::connection_rejected() {
  f_->connections_rejected.Add({{"reason", "max_connections"}}).Increment();
}

void metrics::read_timeout(std::string_view phase) {
  f_->read_timeouts.Add({{"phase", std::string(phase)}}).Increment();
}

void metrics::internal_error(std::string_view where) {
  f_->internal_errors.Add({{"where", std::string(where)}}).Increment();
}

void metrics::backend_counters(const backend_stats& s) {
  std::lock_guard lock(backend_mu_);
  const auto& last = last_backend_;
  f_->backend_in_flight.Add({}).Set(static_cast<double>(s.in_flight));
  f_->backend_connected.Add({}).Set(s.up ? 1 : 0);
  advance(f_->script_calls.Add({}), s.script_calls, last.script_calls);
  advance(f_->other_script_calls.Add({}), s.other_script_calls, last.other_script_calls);
  advance(f_->batched_decisions.Add({}), s.batched_decisions, last.batched_decisions);
  advance(f_->noscript.Add({}), s.noscript, last.noscript);
  advance(f_->cluster_redirects.Add({{"kind", "moved"}}), s.moved, last.moved);
  advance(f_->cluster_redirects.Add({{"kind", "ask"}}), s.ask, last.ask);
  advance(f_->cluster_refreshes.Add({{"result", "success"}}), s.slot_map_refreshes,
          last.slot_map_refreshes);
  advance(f_->cluster_refreshes.Add({{"result", "failure"}}), s.slot_map_refresh_failures,
          last.slot_map_refresh_failures);
  advance(f_->cluster_cross_slot.Add({}), s.cross_slot, last.cross_slot);
  advance(f_->cluster_refunds.Add({{"result", "sent"}}), s.refunds, last.refunds);
  advance(f_->cluster_refunds.Add({{"result", "failed"}}), s.refund_failures, last.refund_failures);
  advance(f_->sentinel_failovers.Add({}), s.failovers, last.failovers);
  f_->memory_keys.Add({}).Set(static_cast<double>(s.keys));
  advance(f_->memory_evicted_live.Add({}), s.evicted_live, last.evicted_live);
  last_backend_ = s;
}

void metrics::limiter_counters(const limiter_stats& s) {
  std::lock_guard lock(backend_mu_);
  const auto& last = last_limiter_;
  advance(f_->cached_denials_evicted.Add({}), s.cached_denials_evicted,
          last.cached_denials_evicted);
  advance(f_->cached_denials.Add({}), s.cached_denials, last.cached_denials);
  last_limiter_ = s;
}

void metrics::lease_counters(const std::vector<std::pair<std::string, lease_stats>>& by_policy) {
  std::lock_guard lock(backend_mu_);
  for (const auto& [name, s] : by_policy) {
    auto& last = last_leases_[name];
    const auto policy = label(name);
    advance(f_->leases.Add({{"policy", policy}, {"result", "granted"}}), s.leases, last.leases);
    advance(f_->leases.Add({{"policy", policy}, {"result", "denied"}}), s.lease_denials,
            last.lease_denials);
    advance(f_->lease_units.Add({{"policy", policy}, {"event", "leased"}}), s.leased_units,
            last.leased_units);
    advance(f_->lease_units.Add({{"policy", policy}, {"event", "expired"}}), s.lease_units_expired,
            last.lease_units_expired);
    advance(f_->lease_units.Add({{"policy", policy}, {"event", "returned"}}),
            s.lease_units_returned, last.lease_units_returned);
    advance(f_->leased_decisions.Add({{"policy", policy}}), s.leased_decisions,
            last.leased_decisions);
    last = s;
  }
}

std::string metrics::serialize() const {
  // Collect() copies each family's values under that family's lock, which request handlers
  // take only to add a series (a counter's increment is atomic): with the series bounded,
  // so is that wait. The text is written afterwards, holding no lock.
  // Every label value that is not the daemon's own constant went through label() when its
  // series was added, so the text is printable UTF-8 (TextSerializer escapes \\, " and \n).
  auto families = registry_->Collect();
  prometheus::TextSerializer s;
  return s.Serialize(families);
}

}  // namespace sluice::daemon
