#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>

#include <atomic>
#include <stdexcept>

#include "algorithm/token_bucket.hpp"
#include "core/burst_log.hpp"
#include "core/deny_cache.hpp"

namespace sluice {

struct limiter::state {
  explicit state(std::shared_ptr<const clock> time_source) : denials(std::move(time_source)) {}

  std::shared_ptr<backend> primary;
  std::shared_ptr<backend> fallback;
  detail::burst_log log{"sluice backend"};
  detail::deny_cache denials;
  std::atomic<std::uint64_t> allowed{0}, denied{0}, invalid{0}, degraded_open{0},
      degraded_closed{0}, degraded_local{0}, backend_errors{0}, cached_denials{0};

  // A denial this process already knows holds, when the policy caches them.
  std::optional<decision> cached_denial(std::string_view key, const policy& p, std::uint64_t cost) {
    if (!p.cache_denials) return std::nullopt;
    auto d = denials.lookup(key, p, cost);
    if (d) cached_denials.fetch_add(1, std::memory_order_relaxed);
    return d;
  }

  // Bookkeeping for a decision the backend made.
  void decided(std::string_view key, const policy& p, std::uint64_t cost, const decision& d) {
    log.success();
    (d.allowed ? allowed : denied).fetch_add(1, std::memory_order_relaxed);
    if (!d.allowed && p.cache_denials) denials.remember(key, p, cost, d);
  }

  // The decision of the policy's failure mode after the primary backend failed with `ec`.
  decision degrade(std::string_view key, const policy& p, std::uint64_t cost,
                   std::error_code ec) noexcept {
    backend_errors.fetch_add(1, std::memory_order_relaxed);
    log.failure(ec);
    decision d;
    const auto params = detail::to_params(p, cost);
    switch (p.on_failure) {
      case failure_mode::open:
        degraded_open.fetch_add(1, std::memory_order_relaxed);
        // As if the bucket were full: the most a client could have been granted.
        d.allowed = true;
        d.limit = p.capacity;
        d.remaining = p.capacity - cost;
        break;
      case failure_mode::closed:
        degraded_closed.fetch_add(1, std::memory_order_relaxed);
        // As if the bucket were empty: retry when `cost` tokens would have refilled.
        d.allowed = false;
        d.limit = p.capacity;
        d.retry_after =
            std::chrono::milliseconds{detail::ceil_div(params.cost_ut, params.rate_ut_per_ms)};
        d.reset_after =
            std::chrono::milliseconds{detail::ceil_div(params.capacity_ut, params.rate_ut_per_ms)};
        break;
      case failure_mode::local:
        degraded_local.fetch_add(1, std::memory_order_relaxed);
        // The memory backend cannot fail; if it ever did, fail closed rather than open.
        if (fallback->decide(key, p, cost, d)) {
          d = decision{};
          d.limit = p.capacity;
        }
        break;
    }
    d.degraded = true;
    d.backend_error = ec;
    return d;
  }
};

limiter::limiter(std::shared_ptr<backend> primary, std::shared_ptr<backend> fallback,
                 std::shared_ptr<const clock> time_source)
    : state_(std::make_shared<state>(time_source ? std::move(time_source) : default_clock())) {
  if (!primary) throw std::invalid_argument("sluice::limiter needs a backend");
  state_->primary = std::move(primary);
  state_->fallback = fallback ? std::move(fallback) : make_memory_backend();
}

limiter limiter::in_memory() {
  auto mem = make_memory_backend();
  return limiter(mem, mem);
}

limiter limiter::from_url(std::string_view url) {
  if (url == "memory") return in_memory();
  // make_redis_backend takes every Redis URL (standalone, cluster, sentinel, TLS or not).
  if (url.starts_with("redis://") || url.starts_with("rediss://") || url.starts_with("redis+") ||
      url.starts_with("rediss+")) {
    redis_options o;
    o.url = std::string(url);
    return limiter(make_redis_backend(std::move(o)));
  }
  throw std::invalid_argument("unsupported backend URL (want \"memory\" or redis://...): " +
                              std::string(url));
}

decision limiter::check(std::string_view key, const policy& p, std::uint64_t cost,
                        std::error_code& ec) noexcept {
  ec = validate(key, p, cost);
  if (ec) {
    state_->invalid.fetch_add(1, std::memory_order_relaxed);
    return {};
  }
  if (auto cached = state_->cached_denial(key, p, cost)) return *cached;
  decision d;
  if (auto bec = state_->primary->decide(key, p, cost, d)) {
    return state_->degrade(key, p, cost, bec);
  }
  state_->decided(key, p, cost, d);
  return d;
}

decision limiter::check(std::string_view key, const policy& p, std::uint64_t cost) {
  std::error_code ec;
  auto d = check(key, p, cost, ec);
  if (ec) throw std::system_error(ec);
  return d;
}

void limiter::start_check(std::string_view key, const policy& p, std::uint64_t cost,
                          decide_handler done) {
  if (auto ec = validate(key, p, cost)) {
    state_->invalid.fetch_add(1, std::memory_order_relaxed);
    done(ec, decision{});
    return;
  }
  if (auto cached = state_->cached_denial(key, p, cost)) {
    done({}, *cached);
    return;
  }
  state_->primary->async_decide(key, p, cost,
                                [st = state_, k = std::string(key), p, cost,
                                 done = std::move(done)](std::error_code ec, decision d) {
                                  if (ec) {
                                    d = st->degrade(k, p, cost, ec);
                                  } else {
                                    st->decided(k, p, cost, d);
                                  }
                                  done({}, d);
                                });
}

limiter_stats limiter::stats() const noexcept {
  const auto& s = *state_;
  constexpr auto r = std::memory_order_relaxed;
  return {s.allowed.load(r),        s.denied.load(r),          s.invalid.load(r),
          s.degraded_open.load(r),  s.degraded_closed.load(r), s.degraded_local.load(r),
          s.backend_errors.load(r), s.cached_denials.load(r)};
}

}  // namespace sluice
