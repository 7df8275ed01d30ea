#pragma once
/// The interface every backend (memory, Redis) implements. Users normally hold a
/// sluice::limiter, which validates input and applies failure modes before and after it.
#include <chrono>
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

/// A quota lease (policy::lease_ttl) that one instance asks a backend for: up to `want`
/// units of the key's limit, debited in one atomic step as a check of that many would be,
/// to be spent by the instance locally (docs/LEASES.md).
struct lease_request {
  /// The cost of the request that asks: a lease is at least this when it fits, and the
  /// grant's decision is a check of this cost.
  std::uint64_t cost = 1;
  /// Units wanted, at least `cost`. The backend grants less when that is more than the
  /// instance's fair share: what is left divided by the instances that asked lately.
  std::uint64_t want = 1;
  /// Who asks (a limiter's random id): the backend counts the distinct askers of the last
  /// lease_ttl to size fair shares. Borrowed until the call returns.
  std::string_view instance;
};

/// What a backend answered to a lease_request.
struct lease_grant {
  decision d;                 ///< a check of the request's cost, as the lease step saw it
  std::uint64_t granted = 0;  ///< units debited: 0 when denied, else at least the cost
  /// How long the units may be spent, counted from when the request was sent: the lease's
  /// ttl, or less when the algorithm's window ends sooner (fixed windows stay exact).
  std::chrono::milliseconds valid{0};
  std::int64_t granted_at_ms = 0;  ///< the backend's time of the grant: what a return names
};

/// Completion of backend::async_lease.
using lease_handler = std::function<void(std::error_code, lease_grant)>;

/// What backend::async_slot does to one slot of a concurrency limit (issue 34).
enum class slot_operation : std::uint8_t {
  acquire,  ///< hold the slot `id` for lease_ttl, if fewer than `limit` hold the key
  release,  ///< free `id`'s slot (harmless when it is not held)
  renew,    ///< extend a live holder's lease to lease_ttl from now
};

/// One step on a key's slots. Every step first forgets the holders whose lease has ended
/// (by the backend's clock), so a holder that died frees its slot when its lease ends.
struct slot_request {
  slot_operation op = slot_operation::acquire;
  /// The slot's id: 32 lowercase hex digits (128 random bits). Borrowed until the call
  /// returns.
  std::string_view id;
  std::uint64_t limit = 1;                 ///< acquire: at most this many holders
  std::chrono::milliseconds lease_ttl{0};  ///< acquire, renew: how long the slot is held
};

/// What a slot step did.
struct slot_reply {
  bool held = false;                         ///< acquired, renewed, or (release) it was held
  std::uint64_t in_flight = 0;               ///< holders of the key after the step
  std::chrono::milliseconds retry_after{0};  ///< an acquire refused: until a lease ends
  std::chrono::milliseconds expires_in{0};   ///< acquired or renewed: the lease
};

/// Completion of backend::async_slot.
using slot_handler = std::function<void(std::error_code, slot_reply)>;

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
  /// Other script calls sent: multi-key decisions, quota leases and their returns, slot
  /// steps, and on a Cluster the redirections followed and refunds.
  std::uint64_t other_script_calls = 0;
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

  /// Takes a quota lease on one validated key (policy::lease_ttl > 0). `handler` is called
  /// exactly once, from a backend thread or inline. Thread-safe. The default answers
  /// errc::unsupported_operation, which tells the limiter to decide every check on the
  /// backend instead (the memory backend: it is as fast as a lease would be).
  virtual void async_lease(std::string_view key, const policy& p, const lease_request& request,
                           lease_handler handler);

  /// Gives back `units` of a lease granted at `granted_at_ms` (lease_grant) and not spent:
  /// a refund, capped as the algorithm's refund is; a window's units go back only to the
  /// window they came from. `handler` gets what a check of 1 sees after. Called as
  /// async_lease. The default answers errc::unsupported_operation.
  virtual void async_lease_return(std::string_view key, const policy& p, std::uint64_t units,
                                  std::int64_t granted_at_ms, decide_handler handler);

  /// One step on a concurrency limit's slots on one validated key (one atomic step, as a
  /// check). `handler` is called exactly once, from a backend thread or inline.
  /// Thread-safe. The default answers errc::unsupported_operation.
  virtual void async_slot(std::string_view key, const slot_request& request, slot_handler handler);

  /// async_slot() answered in place by a backend that can answer without waiting for I/O:
  /// true, with the step done and `ec` / `out` set as async_slot's handler would get them;
  /// false when the step must go through async_slot() (nothing was done). Never blocks.
  /// Thread-safe. The default answers false; the memory backend always answers (it is what
  /// keeps an acquire + release pair there free of type-erased completions).
  virtual bool slot_now(std::string_view key, const slot_request& request, std::error_code& ec,
                        slot_reply& out);
};

}  // namespace sluice
