#include <sluice/limiter.hpp>
#include <sluice/memory_backend.hpp>

#include <sluice/error.hpp>

#include <atomic>
#include <optional>
#include <stdexcept>
#include <vector>

#include "algorithm/limit.hpp"
#include "core/await_decision.hpp"
#include "core/burst_log.hpp"
#include "core/deny_cache.hpp"
#include "core/key_groups.hpp"
#include "core/lease_table.hpp"
#include "core/validate_call.hpp"

namespace sluice {

struct limiter::state {
  state(std::shared_ptr<backend> primary_backend, std::shared_ptr<backend> fallback_backend,
        const std::shared_ptr<const clock>& time_source)
      : primary(std::move(primary_backend)),
        fallback(std::move(fallback_backend)),
        denials(time_source),
        leases(std::make_shared<detail::lease_table>(primary, time_source)) {}

  std::shared_ptr<backend> primary;
  std::shared_ptr<backend> fallback;
  detail::burst_log log{"sluice backend"};
  detail::deny_cache denials;
  // Quota leases (policy::lease_ttl): held by the limiter's copies, and by each ask in flight.
  std::shared_ptr<detail::lease_table> leases;
  std::atomic<std::uint64_t> allowed{0}, denied{0}, invalid{0}, degraded_open{0},
      degraded_closed{0}, degraded_local{0}, backend_errors{0}, cached_denials{0};

  // A denial this process already knows holds, when the policy caches them.
  std::optional<decision> cached_denial(std::string_view key, const policy& p, std::uint64_t cost) {
    if (!p.cache_denials) return std::nullopt;
    auto d = denials.lookup(key, p, cost);
    if (d) cached_denials.fetch_add(1, std::memory_order_relaxed);
    return d;
  }

  // The steps of one check, each written once for the blocking and the asynchronous form
  // (which differ only in how the backend is asked: its blocking decide(), inline on the
  // memory backend, or its async_decide()). begin_check: the answer given before any
  // backend (invalid input, counted; a cached denial), or std::nullopt. end_check: the
  // answer to the backend's result (bookkeeping, or the failure mode).
  struct early {
    std::error_code ec;
    decision d;
  };
  std::optional<early> begin_check(std::string_view key, const policy& p, std::uint64_t cost,
                                   bool policy_valid) {
    // A valid_policy's constructor checked the policy, which cannot have changed since.
    if (auto ec = policy_valid ? detail::validate_call(key, p, cost) : validate(key, p, cost)) {
      invalid.fetch_add(1, std::memory_order_relaxed);
      return early{ec, {}};
    }
    if (auto cached = cached_denial(key, p, cost)) return early{{}, *cached};
    return std::nullopt;
  }
  decision end_check(std::string_view key, const policy& p, std::uint64_t cost, std::error_code bec,
                     const decision& d) {
    if (bec) return degrade(key, p, cost, bec);
    decided(key, p, cost, d);
    return d;
  }

  // Whether a check of `p` is decided from leases (lease_table.hpp) rather than by the backend.
  bool leased(const policy& p) const noexcept {
    return p.lease_ttl.count() > 0 && leases->leasing();
  }

  // The same for a peek (no cache: it spends nothing, so a cached denial may be stale).
  std::optional<early> begin_peek(std::string_view key, const policy& p, std::uint64_t cost) {
    if (auto ec = validate(key, p, cost)) {
      invalid.fetch_add(1, std::memory_order_relaxed);
      return early{ec, {}};
    }
    return std::nullopt;
  }
  decision end_peek(std::string_view key, const policy& p, std::uint64_t cost, std::error_code bec,
                    const decision& d) {
    if (bec) return degrade_peek(key, p, cost, bec);
    log.success();
    return d;
  }

  // Bookkeeping for a decision the backend made.
  void decided(std::string_view key, const policy& p, std::uint64_t cost, const decision& d) {
    log.success();
    (d.allowed ? allowed : denied).fetch_add(1, std::memory_order_relaxed);
    if (!d.allowed && p.cache_denials) denials.remember(key, p, cost, d);
  }

  // What `open` or `closed` decides without asking anyone.
  static decision synthetic(const policy& p, std::uint64_t cost, bool allow) noexcept {
    return detail::to_decision(detail::limit_assumed(detail::to_limit_params(p, cost), allow),
                               limit_of(p));
  }

  // The decision of the policy's failure mode after the primary backend failed with `ec`.
  decision degrade(std::string_view key, const policy& p, std::uint64_t cost,
                   std::error_code ec) noexcept {
    backend_errors.fetch_add(1, std::memory_order_relaxed);
    log.failure(ec);
    decision d;
    switch (p.on_failure) {
      case failure_mode::open:
        degraded_open.fetch_add(1, std::memory_order_relaxed);
        d = synthetic(p, cost, true);
        break;
      case failure_mode::closed:
        degraded_closed.fetch_add(1, std::memory_order_relaxed);
        d = synthetic(p, cost, false);
        break;
      case failure_mode::local:
        degraded_local.fetch_add(1, std::memory_order_relaxed);
        // The memory backend cannot fail; if it ever did, fail closed rather than open.
        if (fallback->decide(key, p, cost, d)) {
          d = decision{};
          d.limit = limit_of(p);
        }
        break;
    }
    d.degraded = true;
    d.backend_error = ec;
    return d;
  }

  // What a peek answers after the primary backend failed with `ec`: the failure mode's
  // answer (`local`: the fallback's peek), marked degraded; nothing is spent either way.
  decision degrade_peek(std::string_view key, const policy& p, std::uint64_t cost,
                        std::error_code ec) noexcept {
    backend_errors.fetch_add(1, std::memory_order_relaxed);
    log.failure(ec);
    decision d;
    if (p.on_failure != failure_mode::local ||
        fallback->operate(key, p, key_operation::peek, cost, d)) {
      d = synthetic(p, cost, p.on_failure != failure_mode::closed);
    }
    d.degraded = true;
    d.backend_error = ec;
    return d;
  }

  // A key operation's input: the key and policy as a check's, `amount` as the operation
  // reads it. Counted when invalid.
  std::error_code validate_operation(std::string_view key, const policy& p, key_operation op,
                                     std::uint64_t amount) noexcept {
    auto ec = validate(key, p, 1);
    if (!ec && (op == key_operation::refund || op == key_operation::penalize ||
                op == key_operation::peek)) {
      ec = detail::validate_call(key, p, amount);  // the policy was checked just above
    }
    if (!ec && op == key_operation::block &&
        (amount < 1 || amount > static_cast<std::uint64_t>(max_window.count()))) {
      ec = errc::invalid_duration;
    }
    if (ec) invalid.fetch_add(1, std::memory_order_relaxed);
    return ec;
  }

  // A key operation's outcome from the primary backend (not a decision: no failure mode).
  std::error_code operated(std::error_code bec) noexcept {
    if (bec) {
      backend_errors.fetch_add(1, std::memory_order_relaxed);
      log.failure(bec);
    } else {
      log.success();
    }
    return bec;
  }

  // check_all's answer before any backend: an error for invalid input, or the whole
  // answer when an item's denial is cached; std::nullopt when the backend must decide.
  std::optional<std::vector<decision>> precheck_all(std::span<const check_item> items,
                                                    std::error_code& ec) {
    ec.clear();
    const auto groups =
        detail::group_keys(items.size(), [&](std::size_t i) { return items[i].key; });
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      ec = validate(it.key, it.policy, it.cost);
      // One key holds one algorithm's state: two algorithms on it in one call is nonsense.
      if (!ec && items[groups.first[groups.group[i]]].policy.algorithm != it.policy.algorithm)
        ec = errc::mismatched_parameters;
      if (ec) {
        invalid.fetch_add(1, std::memory_order_relaxed);
        return std::vector<decision>{};
      }
    }
    std::vector<std::optional<decision>> cached(items.size());
    bool any = false;
    for (std::size_t i = 0; i < items.size(); ++i) {
      cached[i] = cached_denial(items[i].key, items[i].policy, items[i].cost);
      any = any || cached[i].has_value();
    }
    if (!any) return std::nullopt;
    // A denied call spends nothing, so the other items need no round trip either.
    std::vector<decision> out;
    out.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      out.push_back(cached[i] ? *cached[i] : synthetic(items[i].policy, items[i].cost, true));
    }
    return out;
  }

  // Bookkeeping for a multi-key decision the backend made.
  void decided_all(std::span<const check_item> items, const std::vector<decision>& ds) {
    log.success();
    std::optional<detail::key_groups> groups;  // only when a denial may be cached
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      const auto& d = ds[i];
      (d.allowed ? allowed : denied).fetch_add(1, std::memory_order_relaxed);
      if (d.allowed || !it.policy.cache_denials) continue;
      // With another item on the same key, the retry time also waits for that item's
      // cost: more than this key alone needs, so not a denial the cache may repeat.
      if (!groups)
        groups = detail::group_keys(items.size(), [&](std::size_t k) { return items[k].key; });
      if (groups->count[groups->group[i]] == 1) denials.remember(it.key, it.policy, it.cost, d);
    }
  }

  // The failure modes of a multi-key decision whose backend call failed with `ec`.
  std::vector<decision> degrade_all(std::span<const check_item> items, std::error_code ec) {
    backend_errors.fetch_add(1, std::memory_order_relaxed);
    log.failure(ec);
    std::vector<decision> out(items.size());
    bool closed_denies = false;
    std::vector<check_item> local;
    std::vector<std::size_t> local_at;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const auto& it = items[i];
      switch (it.policy.on_failure) {
        case failure_mode::open:
          degraded_open.fetch_add(1, std::memory_order_relaxed);
          out[i] = synthetic(it.policy, it.cost, true);
          break;
        case failure_mode::closed:
          degraded_closed.fetch_add(1, std::memory_order_relaxed);
          out[i] = synthetic(it.policy, it.cost, false);
          closed_denies = true;
          break;
        case failure_mode::local:
          degraded_local.fetch_add(1, std::memory_order_relaxed);
          local.push_back(it);
          local_at.push_back(i);
          break;
      }
    }
    if (!local.empty()) {
      std::vector<decision> ds;
      // Denied anyway: deciding locally would spend local tokens on a denied request.
      const bool decide_locally = !closed_denies;
      std::error_code lec;
      if (decide_locally) lec = fallback->decide_all(local, ds);
      for (std::size_t j = 0; j < local.size(); ++j) {
        auto& d = out[local_at[j]];
        if (!decide_locally) {
          d = synthetic(local[j].policy, local[j].cost, true);
        } else if (lec || ds.size() != local.size()) {
          // The memory backend cannot fail; if it ever did, fail closed rather than open.
          d = decision{};
          d.limit = limit_of(local[j].policy);
        } else {
          d = ds[j];
        }
      }
    }
    for (auto& d : out) {
      d.degraded = true;
      d.backend_error = ec;
    }
    return out;
  }
};

limiter::limiter(std::shared_ptr<backend> primary, std::shared_ptr<backend> fallback,
                 std::shared_ptr<const clock> time_source) {
  if (!primary) throw std::invalid_argument("sluice::limiter needs a backend");
  state_ = std::make_shared<state>(std::move(primary),
                                   fallback ? std::move(fallback) : make_memory_backend(),
                                   time_source ? std::move(time_source) : default_clock());
}

limiter limiter::in_memory() {
  auto mem = make_memory_backend();
  return limiter(mem, mem);
}

decision limiter::check(std::string_view key, const policy& p, std::uint64_t cost,
                        std::error_code& ec) noexcept {
  return check_input(key, p, cost, false, ec);
}

decision limiter::check(std::string_view key, const valid_policy& p, std::uint64_t cost,
                        std::error_code& ec) noexcept {
  return check_input(key, p, cost, true, ec);
}

decision limiter::check(std::string_view key, const valid_policy& p, std::uint64_t cost) {
  std::error_code ec;
  auto d = check(key, p, cost, ec);
  if (ec) throw std::system_error(ec);
  return d;
}

decision limiter::check_input(std::string_view key, const policy& p, std::uint64_t cost,
                              bool policy_valid, std::error_code& ec) noexcept {
  if (auto e = state_->begin_check(key, p, cost, policy_valid)) {
    ec = e->ec;
    return e->d;
  }
  ec.clear();
  decision d;
  std::error_code bec;
  if (state_->leased(p)) {
    if (auto here = state_->leases->decide_here(key, p, cost)) {
      d = *here;
    } else {
      // The backend's own deadline completes the wait well before this safety net.
      constexpr std::chrono::seconds safety_net{30};
      bec = detail::await_decision(
          [&](decide_handler h) { state_->leases->decide_later(key, p, cost, std::move(h)); },
          safety_net, d);
    }
  } else {
    bec = state_->primary->decide(key, p, cost, d);
  }
  return state_->end_check(key, p, cost, bec, d);
}

decision limiter::check(std::string_view key, const policy& p, std::uint64_t cost) {
  std::error_code ec;
  auto d = check(key, p, cost, ec);
  if (ec) throw std::system_error(ec);
  return d;
}

void limiter::start_check(std::string_view key, const policy& p, std::uint64_t cost,
                          bool policy_valid, decide_handler done) const {
  if (auto e = state_->begin_check(key, p, cost, policy_valid)) {
    done(e->ec, e->d);
    return;
  }
  auto finish = [st = state_, k = std::string(key), p, cost, done = std::move(done)](
                    std::error_code bec, decision d) {
    done({}, st->end_check(k, p, cost, bec, d));
  };
  if (!state_->leased(p)) {
    state_->primary->async_decide(key, p, cost, std::move(finish));
  } else if (auto here = state_->leases->decide_here(key, p, cost)) {
    finish({}, *here);
  } else {
    state_->leases->decide_later(key, p, cost, std::move(finish));
  }
}

decision limiter::peek(std::string_view key, const policy& p, std::uint64_t cost,
                       std::error_code& ec) noexcept {
  if (auto e = state_->begin_peek(key, p, cost)) {
    ec = e->ec;
    return e->d;
  }
  ec.clear();
  decision d;
  const auto bec = state_->primary->operate(key, p, key_operation::peek, cost, d);
  return state_->end_peek(key, p, cost, bec, d);
}

decision limiter::peek(std::string_view key, const policy& p, std::uint64_t cost) {
  std::error_code ec;
  auto d = peek(key, p, cost, ec);
  if (ec) throw std::system_error(ec);
  return d;
}

decision limiter::operate(std::string_view key, const policy& p, key_operation op,
                          std::uint64_t amount, std::error_code& ec) noexcept {
  if (op == key_operation::peek) return peek(key, p, amount, ec);
  ec = state_->validate_operation(key, p, op, amount);
  if (ec) return {};
  state_->denials.forget(key);
  state_->leases->forget(key);
  decision d;
  ec = state_->operated(state_->primary->operate(key, p, op, amount, d));
  return ec ? decision{} : d;
}

void limiter::start_operate(std::string_view key, const policy& p, key_operation op,
                            std::uint64_t amount, decide_handler done) const {
  if (op == key_operation::peek) {
    if (auto e = state_->begin_peek(key, p, amount)) {
      done(e->ec, e->d);
      return;
    }
    state_->primary->async_operate(
        key, p, op, amount,
        [st = state_, k = std::string(key), p, amount, done = std::move(done)](
            std::error_code bec, decision d) { done({}, st->end_peek(k, p, amount, bec, d)); });
    return;
  }
  if (auto ec = state_->validate_operation(key, p, op, amount)) {
    done(ec, decision{});
    return;
  }
  state_->denials.forget(key);
  state_->leases->forget(key);
  state_->primary->async_operate(
      key, p, op, amount, [st = state_, done = std::move(done)](std::error_code bec, decision d) {
        const auto ec = st->operated(bec);
        done(ec, ec ? decision{} : d);
      });
}

std::vector<decision> limiter::check_all(std::span<const check_item> items, std::error_code& ec) {
  if (auto early = state_->precheck_all(items, ec)) return std::move(*early);
  std::vector<decision> ds;
  if (items.empty()) return ds;
  const auto bec = state_->primary->decide_all(items, ds);
  if (bec || ds.size() != items.size()) {
    return state_->degrade_all(items, bec ? bec : make_error_code(errc::backend_protocol_error));
  }
  state_->decided_all(items, ds);
  return ds;
}

std::vector<decision> limiter::check_all(std::span<const check_item> items) {
  std::error_code ec;
  auto ds = check_all(items, ec);
  if (ec) throw std::system_error(ec);
  return ds;
}

void limiter::start_check_all(std::vector<owned_check_item> owned, decide_all_handler done) {
  // The views point into `owned`, which stays put in this shared block until the end.
  struct call {
    std::vector<owned_check_item> owned;
    std::vector<check_item> items;
  };
  auto c = std::make_shared<call>();
  c->owned = std::move(owned);
  c->items.reserve(c->owned.size());
  for (const auto& o : c->owned) c->items.push_back({o.key, o.policy, o.cost});
  std::error_code ec;
  if (auto early = state_->precheck_all(c->items, ec)) {
    done(ec, std::move(*early));
    return;
  }
  if (c->items.empty()) {
    done({}, {});
    return;
  }
  state_->primary->async_decide_all(c->items, [st = state_, c, done = std::move(done)](
                                                  std::error_code bec, std::vector<decision> ds) {
    if (bec || ds.size() != c->items.size()) {
      ds = st->degrade_all(c->items, bec ? bec : make_error_code(errc::backend_protocol_error));
    } else {
      st->decided_all(c->items, ds);
    }
    done({}, std::move(ds));
  });
}

std::vector<limiter::owned_check_item> limiter::own(std::span<const check_item> items) {
  std::vector<owned_check_item> owned;
  owned.reserve(items.size());
  for (const auto& it : items) owned.push_back({std::string(it.key), it.policy, it.cost});
  return owned;
}

void limiter::async_check_all(on_backend_thread_t, std::span<const check_item> items,
                              decide_all_handler done) {
  start_check_all(own(items), std::move(done));
}

sluice::backend_stats limiter::backend_stats() const noexcept { return state_->primary->stats(); }

// Concurrency limits (limiter_slots.cpp) take their slots from the same backends.
const std::shared_ptr<backend>& limiter::slot_backend(bool fallback) const noexcept {
  return fallback ? state_->fallback : state_->primary;
}

limiter_stats limiter::stats() const noexcept {
  const auto& s = *state_;
  constexpr auto r = std::memory_order_relaxed;
  const auto l = s.leases->counters().total();
  limiter_stats out{s.allowed.load(r),        s.denied.load(r),          s.invalid.load(r),
                    s.degraded_open.load(r),  s.degraded_closed.load(r), s.degraded_local.load(r),
                    s.backend_errors.load(r), s.cached_denials.load(r),  s.denials.evicted()};
  out.leases = l.leases;
  out.lease_denials = l.lease_denials;
  out.leased_units = l.leased_units;
  out.lease_units_expired = l.lease_units_expired;
  out.lease_units_returned = l.lease_units_returned;
  out.leased_decisions = l.leased_decisions;
  return out;
}

limiter_stats& limiter_stats::operator+=(const limiter_stats& o) noexcept {
  allowed += o.allowed;
  denied += o.denied;
  invalid += o.invalid;
  degraded_open += o.degraded_open;
  degraded_closed += o.degraded_closed;
  degraded_local += o.degraded_local;
  backend_errors += o.backend_errors;
  cached_denials += o.cached_denials;
  cached_denials_evicted += o.cached_denials_evicted;
  leases += o.leases;
  lease_denials += o.lease_denials;
  leased_units += o.leased_units;
  lease_units_expired += o.lease_units_expired;
  lease_units_returned += o.lease_units_returned;
  leased_decisions += o.leased_decisions;
  return *this;
}

std::vector<std::pair<policy, lease_stats>> limiter::lease_stats_by_policy() const {
  return state_->leases->counters().by_policy();
}

}  // namespace sluice
