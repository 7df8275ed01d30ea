#include "core/lease_table.hpp"

#include "core/lease_sweeper.hpp"

#include <sluice/error.hpp>

#include <algorithm>
#include <random>

namespace sluice::detail {
namespace {

constexpr std::size_t shard_count = 16;
// How often ended leases of keys nobody checks are given back, at most.
constexpr std::int64_t sweep_every_ms = 20;

// An id for this table among a key's askers: random, so that two processes never share one.
std::string random_instance_id() {
  std::random_device rd;
  const std::uint64_t v = (std::uint64_t{rd()} << 32) ^ rd();
  static constexpr char hex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (std::size_t i = 0; i < 16; ++i) s[i] = hex[(v >> (4 * i)) & 0xf];
  return s;
}

// How long a denied ask holds back the next one at least: a quarter of the lease's ttl, so
// that an instance over the limit asks a few times per ttl, for what came back meanwhile,
// rather than for every unit. Nothing is lost by waiting while what comes back accumulates:
// so at most a quarter of the time the limit takes to come back whole (a bucket's refill
// from empty, a window).
std::int64_t min_denial_hold_ms(const policy& p) noexcept {
  const double whole_ms = is_window(p.algorithm)
                              ? static_cast<double>(p.window.count())
                              : 1000.0 * static_cast<double>(p.capacity) / p.refill_per_second;
  return static_cast<std::int64_t>(std::min(static_cast<double>(p.lease_ttl.count()), whole_ms) /
                                   4);
}

}  // namespace

lease_table::entry::entry(const policy& limit, std::shared_ptr<lease_policy_counts> c)
    : p(limit),
      counts(std::move(c)),
      ledger(limit.lease_ttl.count(), limit_of(limit), min_denial_hold_ms(limit)) {}

lease_table::lease_table(std::shared_ptr<backend> primary, std::shared_ptr<const clock> time_source)
    : primary_(std::move(primary)),
      clock_(std::move(time_source)),
      instance_(random_instance_id()),
      shards_(shard_count) {}

lease_table::~lease_table() {
  // No ask is in flight (each holds the table), so no check waits: give back what is held.
  for (auto& s : shards_) {
    std::lock_guard lock(s.mu);
    for (auto& [key, e] : s.map) give_back(key, e->p, e->counts, e->ledger.take_all());
  }
}

void lease_table::give_back(const std::string& key, const policy& p,
                            const std::shared_ptr<lease_policy_counts>& counts,
                            const std::vector<lease_lot>& lots) {
  for (const auto& lot : lots) {
    const auto n = static_cast<std::uint64_t>(lot.units);
    counts->expired_units.fetch_add(n, std::memory_order_relaxed);
    primary_->async_lease_return(key, p, n, lot.granted_at_ms,
                                 [n, counts](std::error_code ec, decision) {
                                   if (!ec)
                                     counts->returned_units.fetch_add(n, std::memory_order_relaxed);
                                 });
  }
}

lease_table::shard& lease_table::shard_for(std::string_view key) noexcept {
  return shards_[string_hash{}(key) % shards_.size()];
}

std::int64_t lease_table::now_ms() const noexcept {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clock_->now()).count();
}

lease_table::entry& lease_table::entry_for(shard& s, std::string_view key, const policy& p,
                                           std::int64_t now, after_unlock& later) {
  auto it = s.map.find(key);
  if (it == s.map.end()) {
    it = s.map.emplace(std::string(key), std::make_unique<entry>(p, counters_.of(p))).first;
    it->second->last_used_ms = now;
    return *it->second;
  }
  auto& e = it->second;
  if (!same_lease_limit(e->p, p)) {
    // The policy changed (a reload): give back what was leased under the old one; the
    // checks that wait keep waiting for the ask in flight, whose grant the new ledger takes.
    later.key = std::string(key);
    later.returns_policy = e->p;
    later.returns_counts = e->counts;
    later.returns = e->ledger.take_all();
    auto fresh = std::make_unique<entry>(p, counters_.of(p));
    fresh->waiters = std::move(e->waiters);
    e = std::move(fresh);
  }
  return *e;
}

std::optional<decision> lease_table::try_local(entry& e, std::uint64_t cost, std::int64_t now) {
  const auto limit = limit_of(e.p);
  if (e.ledger.try_spend(static_cast<std::int64_t>(cost), now)) {
    decision d = e.last;
    d.allowed = true;
    d.limit = limit;
    // What the backend had left at the last grant, and what is still held here.
    d.remaining = std::min<std::uint64_t>(
        limit, e.last.remaining + static_cast<std::uint64_t>(e.ledger.held(now)));
    d.retry_after = std::chrono::milliseconds{0};
    return d;
  }
  if (const auto wait = e.ledger.denied_for(now); wait > 0) {
    decision d = e.last;
    d.allowed = false;
    d.limit = limit;
    d.remaining = std::min<std::uint64_t>(limit, static_cast<std::uint64_t>(e.ledger.held(now)));
    d.retry_after = std::chrono::milliseconds{wait};
    d.reset_after = std::max(d.reset_after, d.retry_after);
    return d;
  }
  return std::nullopt;
}

void lease_table::maybe_ask(entry& e, std::string_view key, std::int64_t now, std::int64_t need,
                            std::uint64_t cost, after_unlock& later) {
  const auto want = e.ledger.next_ask(now, need);
  if (!want) return;
  e.asked_at_ms = now;
  later.ask =
      lease_request{.cost = cost,
                    .want = std::max<std::uint64_t>(static_cast<std::uint64_t>(*want), cost),
                    .instance = instance_};
  later.key = std::string(key);
  later.p = e.p;
}

std::optional<decision> lease_table::decide_here(std::string_view key, const policy& p,
                                                 std::uint64_t cost) {
  const auto now = now_ms();
  if (auto at = next_sweep_ms_.load(std::memory_order_relaxed);
      now >= at && next_sweep_ms_.compare_exchange_strong(at, now + sweep_every_ms)) {
    sweep(now);
  }
  after_unlock later;
  std::optional<decision> d;
  {
    auto& s = shard_for(key);
    std::lock_guard lock(s.mu);
    auto& e = entry_for(s, key, p, now, later);
    e.last_used_ms = now;
    e.ledger.note_demand(static_cast<std::int64_t>(cost), now);
    if (auto ended = e.ledger.take_ended(now); !ended.empty()) {
      // Of the policy in force: after a policy change (entry_for) the ledger is new.
      later.key = std::string(key);
      later.returns_policy = e.p;
      later.returns_counts = e.counts;
      later.returns.insert(later.returns.end(), ended.begin(), ended.end());
    }
    // Checks that wait are served first: nothing overtakes them.
    if (e.waiters.empty()) d = try_local(e, cost, now);
    if (d) {
      e.counts->local_decisions.fetch_add(1, std::memory_order_relaxed);
      maybe_ask(e, key, now, 0, cost, later);
    }
  }
  run(later);
  return d;
}

void lease_table::decide_later(std::string_view key, const policy& p, std::uint64_t cost,
                               decide_handler done) {
  const auto now = now_ms();
  after_unlock later;
  {
    auto& s = shard_for(key);
    std::lock_guard lock(s.mu);
    auto& e = entry_for(s, key, p, now, later);
    std::optional<decision> d;
    if (e.waiters.empty()) d = try_local(e, cost, now);
    if (d) {
      e.counts->local_decisions.fetch_add(1, std::memory_order_relaxed);
      later.completions.emplace_back(std::move(done), *d);
      maybe_ask(e, key, now, 0, cost, later);
    } else {
      e.waiters.push_back({cost, std::move(done)});
      std::int64_t need = 0;
      for (const auto& w : e.waiters) need += static_cast<std::int64_t>(w.cost);
      maybe_ask(e, key, now, need, e.waiters.front().cost, later);
    }
  }
  run(later);
}

void lease_table::run(after_unlock& later) {
  if (!later.returns.empty())
    give_back(later.key, later.returns_policy, later.returns_counts, later.returns);
  if (later.ask) {
    primary_->async_lease(later.key, later.p, *later.ask,
                          [self = shared_from_this(), key = later.key](
                              std::error_code ec, lease_grant g) { self->on_granted(key, ec, g); });
  }
  for (auto& [done, d] : later.completions) done({}, d);
  for (auto& [done, ec] : later.failures) done(ec, {});
}

void lease_table::on_granted(const std::string& key, std::error_code ec, const lease_grant& g) {
  const auto now = now_ms();
  after_unlock later;
  std::vector<waiter> to_backend;  // the backend has no leases: decided there, one by one
  policy p;
  bool watch = false;  // units are held: have the sweeper give them back if checks stop
  {
    auto& s = shard_for(key);
    std::lock_guard lock(s.mu);
    auto it = s.map.find(key);
    // An asking entry is never swept, so it is there.
    auto& e = *it->second;
    p = e.p;
    if (ec) {
      e.ledger.ask_failed();
      if (ec == errc::unsupported_operation) {
        leasing_.store(false, std::memory_order_relaxed);
        for (auto& w : e.waiters) to_backend.push_back(std::move(w));
      } else {
        for (auto& w : e.waiters) later.failures.emplace_back(std::move(w.done), ec);
      }
      e.waiters.clear();
    } else {
      e.last = g.d;
      (g.granted > 0 ? e.counts->leases : e.counts->lease_denials)
          .fetch_add(1, std::memory_order_relaxed);
      e.counts->leased_units.fetch_add(g.granted, std::memory_order_relaxed);
      if (g.granted > 0) watch = true;
      // The checks that waited, in order, as far as the grant goes: decided by it whenever it
      // arrived, as a check is by its reply. The rest of the grant is held.
      std::int64_t waiting = 0;
      std::size_t served = 0;
      for (const auto& w : e.waiters) {
        if (waiting + static_cast<std::int64_t>(w.cost) > static_cast<std::int64_t>(g.granted))
          break;
        waiting += static_cast<std::int64_t>(w.cost);
        ++served;
      }
      e.ledger.ask_done({.granted = static_cast<std::int64_t>(g.granted),
                         .valid_ms = g.valid.count(),
                         .granted_at_ms = g.granted_at_ms,
                         .retry_after_ms = g.d.retry_after.count()},
                        e.asked_at_ms, waiting);
      for (std::size_t i = 0; i < served; ++i) {
        decision d = g.d;
        d.allowed = true;
        d.retry_after = std::chrono::milliseconds{0};
        d.remaining = std::min<std::uint64_t>(
            limit_of(e.p), g.d.remaining + static_cast<std::uint64_t>(e.ledger.held(now)));
        later.completions.emplace_back(std::move(e.waiters.front().done), d);
        e.waiters.pop_front();
      }
      // The rest: from units held, or denied with the denial, or one more ask.
      while (!e.waiters.empty()) {
        auto d = try_local(e, e.waiters.front().cost, now);
        if (!d && g.granted == 0) {
          d = g.d;
          d->allowed = false;
        }
        if (!d) break;
        later.completions.emplace_back(std::move(e.waiters.front().done), *d);
        e.waiters.pop_front();
      }
      if (!e.waiters.empty()) {
        std::int64_t need = 0;
        for (const auto& w : e.waiters) need += static_cast<std::int64_t>(w.cost);
        maybe_ask(e, key, now, need, e.waiters.front().cost, later);
      }
    }
  }
  run(later);
  if (watch) watch_leases(shared_from_this());
  for (auto& w : to_backend) primary_->async_decide(key, p, w.cost, std::move(w.done));
}

void lease_table::forget(std::string_view key) {
  auto& s = shard_for(key);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return;
  auto& e = it->second;
  // Not given back: the key's state was changed under them (a reset would take them as a
  // refund of units it never lent).
  for (const auto& lot : e->ledger.take_all())
    e->counts->expired_units.fetch_add(static_cast<std::uint64_t>(lot.units),
                                       std::memory_order_relaxed);
  auto fresh = std::make_unique<entry>(e->p, e->counts);
  fresh->waiters = std::move(e->waiters);
  e = std::move(fresh);
}

bool lease_table::sweep_held() {
  const auto now = now_ms();
  auto at = next_sweep_ms_.load(std::memory_order_relaxed);
  // Checks are sweeping (or the clock stands still, in a test): keep watching.
  if (now < at || !next_sweep_ms_.compare_exchange_strong(at, now + sweep_every_ms)) return true;
  if (sweep(now)) return true;
  watched.store(false, std::memory_order_release);
  // A grant that landed since the sweep found `watched` still set and did not watch the
  // table again: look once more. Whoever sets `watched` first keeps it in the list.
  return holds_units(now) && !watched.exchange(true, std::memory_order_acq_rel);
}

bool lease_table::holds_units(std::int64_t now) {
  for (auto& s : shards_) {
    std::lock_guard lock(s.mu);
    for (const auto& [key, e] : s.map)
      if (e->ledger.asking() || e->ledger.held(now) > 0) return true;
  }
  return false;
}

bool lease_table::sweep(std::int64_t now) {
  bool held = false;
  struct ended {
    std::string key;
    policy p;
    std::shared_ptr<lease_policy_counts> counts;
    std::vector<lease_lot> lots;
  };
  for (auto& s : shards_) {
    std::vector<ended> returns;
    {
      std::lock_guard lock(s.mu);
      for (auto it = s.map.begin(); it != s.map.end();) {
        auto& e = *it->second;
        if (auto lots = e.ledger.take_ended(now); !lots.empty())
          returns.push_back({it->first, e.p, e.counts, std::move(lots)});
        const bool holds = e.ledger.asking() || e.ledger.held(now) > 0;
        held = held || holds;
        const bool idle =
            e.waiters.empty() && !holds && now - e.last_used_ms > 2 * e.p.lease_ttl.count();
        it = idle ? s.map.erase(it) : std::next(it);
      }
    }
    for (const auto& r : returns) give_back(r.key, r.p, r.counts, r.lots);
  }
  return held;
}

}  // namespace sluice::detail
