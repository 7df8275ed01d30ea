// The runtime in force (runtime.hpp): building one from a config (the backend, one limiter
// per server thread on a standalone Redis), keeping the backend across a reload that does not
// change it, and SIGHUP's reload.
#include "service.hpp"

#include <map>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>
#include <boost/asio/post.hpp>

#include <sluice/backend_url.hpp>
#include <sluice/memory_backend.hpp>
#include <sluice/redis_backend.hpp>

#include "core/lease_counters.hpp"
#include "envoy/rls_config.hpp"
#include "safe_log.hpp"

namespace sluice::daemon {
namespace {

// redis:// or rediss://: the URLs whose backend can run on the server threads (run_on).
bool is_standalone_redis(std::string_view url) {
  const auto scheme = parse_backend_scheme(url);
  return scheme && scheme->kind == backend_kind::redis;
}

bool same_backend(const config& a, const config& b) {
  if (a.backend != b.backend || a.memory_max_keys != b.memory_max_keys) return false;
  // The memory backend has no prefix, timeouts or connections: changing them must not reset
  // its buckets.
  return a.backend == "memory" ||
         (a.key_prefix == b.key_prefix && a.backend_timeout == b.backend_timeout &&
          a.backend_connect_timeout == b.backend_connect_timeout &&
          (!is_standalone_redis(a.backend) ||
           a.redis_connection_per_thread == b.redis_connection_per_thread));
}

}  // namespace

sluice::backend_stats runtime::backend_stats() const noexcept {
  if (thread_limiters.empty()) return lim->backend_stats();
  sluice::backend_stats sum;
  for (const auto& [io, l] : thread_limiters) {
    const auto s = l->backend_stats();
    sum.in_flight += s.in_flight;
    sum.up = sum.up && s.up;
    sum.script_calls += s.script_calls;
    sum.batched_decisions += s.batched_decisions;
    sum.noscript += s.noscript;
    sum.other_script_calls += s.other_script_calls;
  }
  return sum;
}

sluice::limiter_stats runtime::limiter_stats() const noexcept {
  if (thread_limiters.empty()) return lim->stats();
  sluice::limiter_stats sum;
  for (const auto& [io, l] : thread_limiters) sum += l->stats();
  return sum;
}

namespace {

// Adds the stat keys of the RLS descriptors under `ds` that lease as `p` does.
void rls_names_of(const std::vector<envoy::rls_descriptor_config>& ds, const policy& p,
                  std::vector<std::string>& names) {
  for (const auto& d : ds) {
    if (d.rate_limit && d.rate_limit->lease_ttl.count() > 0 &&
        detail::same_lease_limit(d.rate_limit->policy, p))
      names.push_back(d.full_key);
    rls_names_of(d.descriptors, p, names);
  }
}

std::string lease_label(const config& c, const policy& p) {
  std::vector<std::string> names;
  for (const auto& [name, q] : c.policies)
    if (q.lease_ttl.count() > 0 && detail::same_lease_limit(q, p)) names.push_back(name);
  if (c.envoy_rls.limits)
    for (const auto& [domain, d] : c.envoy_rls.limits->domains)
      rls_names_of(d.descriptors, p, names);
  if (names.empty()) return "(previous config)";
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

std::vector<std::pair<std::string, lease_stats>> runtime::lease_stats_by_policy() const {
  std::vector<limiter*> lims;
  for (const auto& tl : thread_limiters) lims.push_back(tl.second.get());
  if (lims.empty()) lims.push_back(lim.get());
  std::map<std::string, lease_stats, std::less<>> by_label;
  for (auto* l : lims)
    for (const auto& [p, s] : l->lease_stats_by_policy()) by_label[lease_label(cfg, p)] += s;
  return {by_label.begin(), by_label.end()};
}

limiter& runtime::limiter_here() const noexcept {
  for (const auto& [io, l] : thread_limiters) {
    if (io->get_executor().running_in_this_thread()) return *l;
  }
  return *lim;
}

service::service(config c, std::vector<boost::asio::io_context*> workers,
                 std::shared_ptr<const clock> time_source)
    : workers_(std::move(workers)),
      time_source_(std::move(time_source)),
      published_(std::make_shared<published>(build(std::move(c), nullptr), workers_.size())),
      rls_(std::make_unique<rls_decider>(metrics_)) {
  metrics_.set_max_rls_series(current()->cfg.envoy_rls.max_metric_series);
}

service::published::published(std::shared_ptr<const runtime> first, std::size_t threads)
    : current(std::move(first)), copies(threads) {}

std::shared_ptr<const runtime> service::published::load() const {
  std::lock_guard lock(mu);
  return current;
}

const std::shared_ptr<const runtime>& service::published::copy_for(std::size_t i) {
  // Read before `current`: a generation seen here was raised after its runtime was stored.
  const auto now = generation.load(std::memory_order_acquire);
  auto& copy = copies[i];
  if (copy.generation != now) {
    copy.rt = load();
    copy.generation = now;
  }
  return copy.rt;
}

std::shared_ptr<const runtime> service::current() const {
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i]->get_executor().running_in_this_thread()) return published_->copy_for(i);
  }
  return published_->load();
}

void service::publish(std::shared_ptr<const runtime> next) {
  {
    std::lock_guard lock(published_->mu);
    published_->current.swap(next);  // the old runtime goes outside the lock
  }
  published_->generation.fetch_add(1, std::memory_order_release);
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    boost::asio::post(*workers_[i], [weak = std::weak_ptr<published>(published_), i] {
      if (const auto p = weak.lock()) p->copy_for(i);
    });
  }
}

std::shared_ptr<const runtime> service::build(config c,
                                              const std::shared_ptr<const runtime>& prev) const {
  auto rt = std::make_shared<runtime>();
  rt->rules = std::make_shared<const http::rule_set>(c.policies, c.rules, c.keys);
  rt->memory_backend = c.backend == "memory";
  if (prev && same_backend(prev->cfg, c)) {
    rt->lim = prev->lim;
    rt->thread_limiters = prev->thread_limiters;
  } else {
    memory_options mo;
    mo.max_keys = c.memory_max_keys;
    mo.time_source = time_source_;
    auto mem = make_memory_backend(mo);
    if (rt->memory_backend) {
      rt->lim = std::make_shared<limiter>(mem, mem, time_source_);
    } else {
      redis_options ro;
      ro.url = c.backend;
      ro.key_prefix = c.key_prefix;
      ro.command_timeout = c.backend_timeout;
      ro.connect_timeout = c.backend_connect_timeout;
      // Cluster and Sentinel backends run their own I/O threads (run_on is standalone only).
      const bool standalone = is_standalone_redis(c.backend);
      if (c.redis_connection_per_thread && !standalone) {
        spdlog::warn(
            "redis_connections: per_thread applies to redis:// and rediss:// only; "
            "{} keeps its own connections",
            redacted_url(c.backend));
      }
      if (standalone && c.redis_connection_per_thread && !workers_.empty()) {
        for (auto* io : workers_) {
          auto on_thread = ro;
          on_thread.run_on = io;
          rt->thread_limiters.emplace_back(
              io, std::make_shared<limiter>(make_redis_backend(on_thread.url, on_thread), mem,
                                            time_source_));
        }
        rt->lim = rt->thread_limiters.front().second;
      } else {
        rt->lim = std::make_shared<limiter>(make_redis_backend(ro.url, ro), mem, time_source_);
      }
    }
  }
  rt->cfg = std::move(c);
  return rt;
}

void service::apply(config c) {
  // Two reloads at once would each build on the same predecessor: one at a time.
  std::lock_guard lock(apply_mu_);
  auto prev = published_->load();
  auto next = build(std::move(c), prev);
  metrics_.set_max_rls_series(next->cfg.envoy_rls.max_metric_series);
  publish(std::move(next));
}

bool service::reload(const std::string& path, const std::function<void(config&)>& adjust) {
  try {
    auto c = load_config_file(path);
    if (adjust) adjust(c);
    auto prev = current();
    if (c.listen() != prev->cfg.listen() || c.threads != prev->cfg.threads) {
      spdlog::warn("reload: listen and threads take effect only on restart");
    }
    if (c.envoy_rls.enabled() != prev->cfg.envoy_rls.enabled() ||
        (c.envoy_rls.enabled() && c.envoy_rls.listen() != prev->cfg.envoy_rls.listen())) {
      spdlog::warn(
          "reload: envoy_rls's gRPC listener (added, removed or its listen) changes only on "
          "restart; its limits and failure mode apply now");
    }
    if (c.envoy_rls.enabled() && prev->cfg.envoy_rls.enabled() &&
        !(c.envoy_rls.transport == prev->cfg.envoy_rls.transport)) {
      // The gRPC listener's connections were made with the bounds it started with.
      spdlog::warn(
          "reload: envoy_rls's connection limits (max_connections, streams, sizes, timeouts) "
          "change only on restart");
    }
    set_daemon_log_level(spdlog::level::from_str(c.log_level));
    apply(std::move(c));
    metrics_.reload(true);
    spdlog::info("reload: applied {}", path);
    return true;
  } catch (const std::exception& e) {
    metrics_.reload(false);
    spdlog::error("reload: rejected, the previous config keeps serving: {}", e.what());
    return false;
  }
}

}  // namespace sluice::daemon
