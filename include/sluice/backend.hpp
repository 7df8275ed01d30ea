#pragma once
/// The interface every backend (memory, Redis) implements. Users normally hold a
/// sluice::limiter, which validates input and applies failure modes before and after it.
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <system_error>
#include <vector>

#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice {

/// One limit of a multi-key decision (backend::decide_all, limiter::check_all): spend `cost`
/// tokens of `policy` on `key`. The key is only borrowed: it must stay valid until the call
/// that takes it returns (asynchronous calls copy it).
struct check_item {
  std::string_view key;
  sluice::policy policy;
  std::uint64_t cost = 1;
};

/// True when every decision allowed: what a multi-key decision admits (also for an empty list).
inline bool all_allowed(std::span<const decision> ds) noexcept {
  for (const auto& d : ds) {
    if (!d.allowed) return false;
  }
  return true;
}

/// What backend::operate does to one key (limiter::peek, reset, refund, penalize, block).
/// Each is one atomic step on the backend, like a check.
enum class key_operation : std::uint8_t {
  peek = 1,  ///< the decision a check of `amount` would get now, spending nothing
  reset,     ///< forget the key's state (and any block): it decides as a new key
  refund,    ///< give back `amount`, never leaving more than if nothing had been spent
  /// spend `amount` whatever is left: a bucket may go below zero (at most one capacity), a
  /// window's count above its limit (at most twice it), so the client waits longer
  penalize,
  block,  ///< deny the key for `amount` milliseconds whatever its state; then it starts afresh
};

/// Completion of backend::async_decide: an error (backend trouble) or a decision.
using decide_handler = std::function<void(std::error_code, decision)>;
/// Completion of backend::async_decide_all: an error (backend trouble) or one decision per
/// item, in the items' order.
using decide_all_handler = std::function<void(std::error_code, std::vector<decision>)>;

/// What a backend has done, for metrics: counters (monotonic) and the gauges `in_flight`
/// and `up`. A field a backend does not have stays 0 (`up`: true). Declared once here, read
/// with backend::stats() or limiter::backend_stats(), exported by sluiced on /metrics.
struct backend_stats {
  // Every Redis topology.
  std::uint64_t in_flight = 0;          ///< gauge: decisions accepted and not yet completed
  bool up = true;                       ///< gauge: connected (Cluster: a slot map is known)
  std::uint64_t script_calls = 0;       ///< decision script calls sent (a batch counts once)
  std::uint64_t batched_decisions = 0;  ///< decisions those calls carried
  std::uint64_t noscript = 0;           ///< NOSCRIPT answers (the script's source resent)
  // Redis Cluster.
  std::uint64_t moved = 0;                      ///< MOVED redirections followed
  std::uint64_t ask = 0;                        ///< ASK redirections followed
  std::uint64_t slot_map_refreshes = 0;         ///< slot maps received
  std::uint64_t slot_map_refresh_failures = 0;  ///< refresh rounds no node answered
  std::uint64_t cross_slot = 0;                 ///< multi-key decisions decided slot by slot
  std::uint64_t refunds = 0;                    ///< refunds sent for slot groups spent in vain
  std::uint64_t refund_failures = 0;            ///< of those, failed (their tokens stay spent)
  // Redis Sentinel.
  std::uint64_t failovers = 0;  ///< times the backend moved to another master
  // The memory backend.
  std::uint64_t keys = 0;  ///< gauge: keys held (at most memory_options::max_keys)
  /// Keys forgotten while still limiting (max_keys reached and no key of the bounded search
  /// for room decided as a new key would): each such key starts over with a full limit.
  std::uint64_t evicted_live = 0;
};

class backend {
 public:
  virtual ~backend() = default;

  /// What this backend has done so far. Thread-safe, lock-free where it matters: it is read
  /// at every metrics scrape.
  virtual backend_stats stats() const noexcept { return {}; }

  /// Decides one request whose input is already validated. Blocks until decided or the
  /// backend's own timeout. Thread-safe. Must not be called from a thread that the
  /// backend's I/O runs on.
  virtual std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                                 decision& out) = 0;

  /// Decides asynchronously. `handler` is called exactly once, from a backend thread or
  /// inline (the limiter re-posts it, so user handlers never run inline). Thread-safe.
  /// A handler called on a backend thread must not block: that thread serves every call,
  /// and a limiter's async completion requested from it is posted only once it returns.
  virtual void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                            decide_handler handler) = 0;

  /// Decides several validated items all-or-nothing: when every item allows, all of them
  /// spend their tokens, in one atomic step; when any item denies, no item spends anything.
  /// `out` gets one decision per item, in order:
  /// - all allowed: each as if the items were decided one after another (an item sees what
  ///   earlier items on the same key spent);
  /// - otherwise, for every item, `remaining` and `reset_after` describe its bucket as it
  ///   is (nothing was spent); a denying item has `allowed == false` and the exact
  ///   `retry_after` until its cost (plus what earlier allowing items on the same key would
  ///   spend) is there; an item that would have allowed has `allowed == true` and
  ///   `retry_after == 0`, and spent nothing.
  /// Blocks like decide(). Thread-safe.
  ///
  /// The memory, Redis and Sentinel backends are atomic; the Redis Cluster backend is atomic
  /// for items whose keys share one slot (see docs/cluster.md for keys on several slots).
  /// The default implementation, for backends that cannot do better, calls decide() per
  /// item and is NOT all-or-nothing: an allowing item keeps its tokens when another denies.
  virtual std::error_code decide_all(std::span<const check_item> items, std::vector<decision>& out);

  /// Applies `op` to one validated key (amount: peek's cost, refund's or penalize's units,
  /// block's milliseconds). `out` is peek's decision; for the others, what a check of cost
  /// 1 sees right after (a blocked key: denied, retry_after = the rest of the block).
  /// Blocks like decide(). Thread-safe. The default implementation answers
  /// errc::unsupported_operation.
  virtual std::error_code operate(std::string_view key, const policy& p, key_operation op,
                                  std::uint64_t amount, decision& out);

  /// operate() asynchronously. `handler` is called exactly once, from a backend thread or
  /// inline (the limiter re-posts it). Thread-safe. The default implementation calls
  /// operate() where it is asked, blocking the caller: a backend that does I/O overrides it.
  virtual void async_operate(std::string_view key, const policy& p, key_operation op,
                             std::uint64_t amount, decide_handler handler);

  /// decide_all() asynchronously. `handler` is called exactly once, from a backend thread
  /// or inline (the limiter re-posts it). Thread-safe. The default implementation chains
  /// async_decide() per item (not all-or-nothing, as decide_all()'s default).
  virtual void async_decide_all(std::span<const check_item> items, decide_all_handler handler);
};

}  // namespace sluice
