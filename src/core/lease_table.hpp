#pragma once
// One limiter's quota leases (policy::lease_ttl, issue 33): for each leased key, the units
// this process holds (lease_ledger.hpp), the checks waiting for the ask in flight, and the
// I/O around them: asks (backend::async_lease) sent ahead of demand, one at a time per key,
// and what a lease did not spend given back (backend::async_lease_return) when it ends, when
// the key's policy changes and when the table is destroyed.
//
// A check is decided here, in-process and without I/O, while the key's leases hold its cost
// (allowed) or the last ask was denied and its retry time has not passed (denied). Otherwise
// it waits for the key's ask in flight (one is sent if none is), and is decided by its reply,
// as a check is by its script's reply: granted units go first to the checks that waited, in
// order. A failed ask completes its waiters with its error, which the limiter turns into the
// policy's failure mode; units held keep deciding until their lease ends.
//
// Thread-safe: each key's state is guarded by its shard's mutex; no I/O and no completion
// runs under it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sluice/backend.hpp>
#include <sluice/clock.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

#include "core/string_hash.hpp"

#include "core/lease_counters.hpp"
#include "core/lease_ledger.hpp"

namespace sluice::detail {

class lease_table : public std::enable_shared_from_this<lease_table> {
 public:
  lease_table(std::shared_ptr<backend> primary, std::shared_ptr<const clock> time_source);
  /// Gives back everything held (fire and forget: the backend outlives this call).
  ~lease_table();
  lease_table(const lease_table&) = delete;
  lease_table& operator=(const lease_table&) = delete;

  /// False once the backend said it has no leases (errc::unsupported_operation): every
  /// check is then the backend's, as without lease_ttl.
  bool leasing() const noexcept { return leasing_.load(std::memory_order_relaxed); }

  /// Decides a validated check of `cost` on `key` (p.lease_ttl > 0) in-process when it can:
  /// the decision, or std::nullopt when it must wait (decide_later()).
  std::optional<decision> decide_here(std::string_view key, const policy& p, std::uint64_t cost);
  /// Decides the check, waiting for the key's ask when it must. `done` runs exactly once,
  /// inline or on a backend thread, with the backend's error (for the failure mode) or the
  /// decision.
  void decide_later(std::string_view key, const policy& p, std::uint64_t cost, decide_handler done);

  /// A key operation changed `key`'s state on the backend: drop the units held for it, so
  /// what it did (a reset, a block, a penalty) applies here from the next check on.
  void forget(std::string_view key);

  /// For the sweeper (lease_sweeper.hpp): gives back the leases that ended, unless checks
  /// did so lately. False when the table holds no units any more (the sweeper then stops
  /// watching it, until the next grant).
  bool sweep_held();
  /// Whether the sweeper watches this table (set by watch_leases, cleared by sweep_held).
  std::atomic<bool> watched{false};

  /// What leases did, per policy and in total (limiter_stats).
  const lease_counter_registry& counters() const noexcept { return counters_; }

 private:
  struct waiter {
    std::uint64_t cost;
    decide_handler done;
  };
  struct entry {
    entry(const policy& p, std::shared_ptr<lease_policy_counts> c);
    policy p;
    std::shared_ptr<lease_policy_counts> counts;  // p's
    lease_ledger ledger;
    std::deque<waiter> waiters;
    std::int64_t asked_at_ms = 0;
    decision last;  // the backend's last answer: remaining and reset_after for local ones
    std::int64_t last_used_ms = 0;
  };
  struct alignas(64) shard {
    std::mutex mu;
    std::unordered_map<std::string, std::unique_ptr<entry>, string_hash, std::equal_to<>> map;
  };
  // What to do once the shard's lock is released: an ask to send, units to give back,
  // completions to run.
  struct after_unlock {
    std::optional<lease_request> ask;
    std::string key;
    policy p;
    std::vector<lease_lot> returns;
    policy returns_policy;
    std::shared_ptr<lease_policy_counts> returns_counts;
    std::vector<std::pair<decide_handler, decision>> completions;
    std::vector<std::pair<decide_handler, std::error_code>> failures;
  };

  shard& shard_for(std::string_view key) noexcept;
  std::int64_t now_ms() const noexcept;
  // The key's entry under `p`, made (or remade, when its policy changed) as needed.
  entry& entry_for(shard& s, std::string_view key, const policy& p, std::int64_t now,
                   after_unlock& later);
  // A decision from what is held or the denial that holds; std::nullopt when neither.
  std::optional<decision> try_local(entry& e, std::uint64_t cost, std::int64_t now);
  // Sets later.ask when the ledger wants one (`need`: units that could not be spent).
  void maybe_ask(entry& e, std::string_view key, std::int64_t now, std::int64_t need,
                 std::uint64_t cost, after_unlock& later);
  void run(after_unlock& later);
  // Gives `lots` of `key` back, counting them as expired now and as returned once the
  // backend took them.
  void give_back(const std::string& key, const policy& p,
                 const std::shared_ptr<lease_policy_counts>& counts,
                 const std::vector<lease_lot>& lots);
  void on_granted(const std::string& key, std::error_code ec, const lease_grant& g);
  // Gives back the leases that ended and drops idle keys; true when units are still held.
  bool sweep(std::int64_t now);
  // Whether any key holds units or asks for them.
  bool holds_units(std::int64_t now);

  const std::shared_ptr<backend> primary_;
  const std::shared_ptr<const clock> clock_;
  const std::string instance_;  // this table's id among the key's askers
  std::vector<shard> shards_;
  std::atomic<bool> leasing_{true};
  std::atomic<std::int64_t> next_sweep_ms_{0};
  lease_counter_registry counters_;
};

}  // namespace sluice::detail
