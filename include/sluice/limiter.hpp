#pragma once
/// sluice::limiter: validates a request, asks its backend, and applies the policy's
/// failure mode when the backend fails.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/system_executor.hpp>

#include <sluice/backend.hpp>
#include <sluice/clock.hpp>
#include <sluice/completion.hpp>
#include <sluice/concurrency.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice {

/// Selects the async_check / async_check_all overloads whose handler runs on the backend's
/// own thread instead of being posted to an executor.
struct on_backend_thread_t {
  explicit on_backend_thread_t() = default;
};
inline constexpr on_backend_thread_t on_backend_thread{};

/// What quota leases (policy::lease_ttl; docs/LEASES.md) did for one policy:
/// limiter::lease_stats_by_policy(). Monotonic. The fields mean what limiter_stats' do.
struct lease_stats {
  std::uint64_t leases = 0;
  std::uint64_t lease_denials = 0;
  std::uint64_t leased_units = 0;
  std::uint64_t lease_units_expired = 0;
  std::uint64_t lease_units_returned = 0;
  std::uint64_t leased_decisions = 0;

  /// Adds `o`'s counts (the stats of several limiters, summed).
  lease_stats& operator+=(const lease_stats& o) noexcept {
    leases += o.leases;
    lease_denials += o.lease_denials;
    leased_units += o.leased_units;
    lease_units_expired += o.lease_units_expired;
    lease_units_returned += o.lease_units_returned;
    leased_decisions += o.leased_decisions;
    return *this;
  }
};

/// Counts of what a limiter did, for metrics. Monotonic; read with limiter::stats().
struct limiter_stats {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t invalid = 0;
  std::uint64_t degraded_open = 0;
  std::uint64_t degraded_closed = 0;
  std::uint64_t degraded_local = 0;
  std::uint64_t backend_errors = 0;
  std::uint64_t cached_denials = 0;  ///< denied in-process (policy::cache_denials), no round trip
  /// Denials the in-process cache forgot before they lapsed, to stay within its bound
  /// (100,000 keys): harmless to exactness, each costs that key one more backend call.
  std::uint64_t cached_denials_evicted = 0;
  // Quota leases (policy::lease_ttl; docs/LEASES.md).
  std::uint64_t leases = 0;                ///< leases granted by the backend
  std::uint64_t lease_denials = 0;         ///< asks for a lease denied (the limit used up)
  std::uint64_t leased_units = 0;          ///< units those leases held
  std::uint64_t lease_units_expired = 0;   ///< units of leases that ended unspent
  std::uint64_t lease_units_returned = 0;  ///< of those, given back to the backend
  /// Checks decided in-process from leases (allowed, or denied while a lease denial holds),
  /// with no backend call; also counted in allowed / denied.
  std::uint64_t leased_decisions = 0;

  /// Adds `o`'s counts (the stats of several limiters, summed).
  limiter_stats& operator+=(const limiter_stats& o) noexcept;
};

/// Decides checks with a backend, applies the failure modes and counts what it did.
///
/// A limiter is a cheap handle to shared state (one shared_ptr): a copy decides from the
/// same backend and buckets, with the same fallback, denial cache and stats, and keeps
/// them alive after the original is gone. Copy it to hand one limiter to many objects or
/// threads; make another (limiter::in_memory, limiter_from_url, the constructor) for separate
/// buckets. Every member function is thread-safe; copying and assigning a handle are as
/// thread-safe as copying a std::shared_ptr.
class limiter {
 public:
  /// `primary` decides; `fallback` (a memory backend, created when null) serves the
  /// `local` failure mode; `time_source` (default: steady_clock) times the cache of denials.
  explicit limiter(std::shared_ptr<backend> primary, std::shared_ptr<backend> fallback = nullptr,
                   std::shared_ptr<const clock> time_source = nullptr);

  /// A limiter on a fresh memory backend.
  static limiter in_memory();
  // A limiter for a backend URL ("memory", redis://...): sluice::limiter_from_url, in
  // sluice/redis_backend.hpp (the sluice::redis component, which defines it).

  /// Blocking check. Never throws: `ec` is set only for invalid input (sluice::errc);
  /// backend trouble yields the failure mode's degraded decision. Thread-safe.
  decision check(std::string_view key, const policy& p, std::uint64_t cost,
                 std::error_code& ec) noexcept;
  /// Blocking check that throws std::system_error for invalid input.
  decision check(std::string_view key, const policy& p, std::uint64_t cost = 1);
  /// check() against a policy validated when it was made (sluice::valid_policy): only the
  /// key and the cost are checked per call. Every overload below that takes a
  /// valid_policy does the same, and otherwise behaves as the one taking a policy.
  decision check(std::string_view key, const valid_policy& p, std::uint64_t cost,
                 std::error_code& ec) noexcept;
  decision check(std::string_view key, const valid_policy& p, std::uint64_t cost = 1);

  /// Asynchronous check. Completion signature: `void(std::error_code, sluice::decision)`,
  /// with the error set only for invalid input. The handler never runs inline: it is
  /// posted to its associated executor (default: boost::asio::system_executor), and is
  /// destroyed there once it has run. The completions that one Redis reply brings for the
  /// same io_context are posted to it as one operation, so they run one after another, in
  /// order, on one of its threads (one wake-up per reply instead of one per check): a
  /// handler that blocks holds up the others of its reply. For other executors (a strand, a
  /// thread pool) each completion is posted on its own.
  /// Works with callbacks, `use_awaitable`, `use_future` and other completion tokens; as
  /// std::error_code is not Asio's error type, those yield `std::tuple<std::error_code,
  /// decision>` rather than throwing.
  template <class CompletionToken>
  auto async_check(std::string_view key, const policy& p, std::uint64_t cost,
                   CompletionToken&& token) {
    return initiate_decision(std::forward<CompletionToken>(token),
                             [this, k = std::string(key), p, cost](decide_handler done) {
                               start_check(k, p, cost, false, std::move(done));
                             });
  }
  template <class CompletionToken>
  auto async_check(std::string_view key, const valid_policy& p, std::uint64_t cost,
                   CompletionToken&& token) {
    return initiate_decision(std::forward<CompletionToken>(token),
                             [this, k = std::string(key), p, cost](decide_handler done) {
                               start_check(k, p, cost, true, std::move(done));
                             });
  }

  /// async_check() for callers whose own event loop is not Asio's (gRPC's callback API,
  /// libuv, a C callback): `done` is not posted anywhere but called where the backend
  /// completes the check, with no hand-off between threads. That is inline, before this
  /// returns, for the memory backend, a cached denial or invalid input; for Redis it is the
  /// connection's I/O thread, right after the reply is read, so `done` must be short and
  /// must not block (every other check that the connection completes waits for it).
  /// Failure modes, validation and stats as async_check. Thread-safe.
  void async_check(on_backend_thread_t, std::string_view key, const policy& p, std::uint64_t cost,
                   decide_handler done) {
    start_check(key, p, cost, false, std::move(done));
  }
  void async_check(on_backend_thread_t, std::string_view key, const valid_policy& p,
                   std::uint64_t cost, decide_handler done) {
    start_check(key, p, cost, true, std::move(done));
  }
  /// async_check_all() that calls `done` where the backend completes it, as the
  /// on_backend_thread async_check().
  void async_check_all(on_backend_thread_t, std::span<const check_item> items,
                       decide_all_handler done);

  /// Blocking all-or-nothing check of several limits: one decision per item, in order; the
  /// request they describe is admitted only if every decision allows (all_allowed()), and
  /// only then does any item spend its tokens (backend::decide_all says what each decision
  /// reports, and which backends are atomic). Every item is validated as check() validates
  /// it; `ec` is set only for invalid input (the first invalid item's code), and then
  /// nothing is decided and the result is empty. An empty list yields an empty result.
  ///
  /// When the backend fails, each item takes its own policy's failure mode, all marked
  /// degraded: `open` items allow and `closed` items deny as in check(); the `local` items
  /// are decided together by the fallback, all-or-nothing among themselves, unless a
  /// `closed` item already denies, in which case they are not decided and report what
  /// `open` reports (allowed, nothing spent). With policy::cache_denials, an item whose
  /// denial is cached answers the whole call without a round trip: the cached items report
  /// their denial, the others were not looked at and report `allowed`, `remaining =
  /// capacity - cost`, `reset_after` 0 (nothing is spent anyway). Counted per item in
  /// stats() (an allowing item of a denied call counts as allowed). Thread-safe; throws
  /// only std::bad_alloc.
  std::vector<decision> check_all(std::span<const check_item> items, std::error_code& ec);
  /// check_all() that throws std::system_error for invalid input.
  std::vector<decision> check_all(std::span<const check_item> items);

  /// Asynchronous check_all(). The items (keys included) are copied before this returns.
  /// Completion signature: `void(std::error_code, std::vector<sluice::decision>)`, with the
  /// error set only for invalid input. The handler never runs inline: it is posted to its
  /// associated executor (default: boost::asio::system_executor). Completion tokens as for
  /// async_check (`use_future` yields `std::tuple<std::error_code, std::vector<decision>>`).
  template <class CompletionToken>
  auto async_check_all(std::span<const check_item> items, CompletionToken&& token) {
    auto owned = own(items);
    return boost::asio::async_initiate<CompletionToken,
                                       void(std::error_code, std::vector<decision>)>(
        [this](auto handler, std::vector<owned_check_item> its) {
          start_check_all(std::move(its), [parked = detail::parked_handler(std::move(handler))](
                                              std::error_code ec, std::vector<decision> ds) {
            parked.post([ec, ds = std::move(ds)](auto& h) mutable { h(ec, std::move(ds)); });
          });
        },
        token, std::move(owned));
  }

  /// What a check of `cost` would decide now, spending nothing. Input errors as check();
  /// backend trouble yields the failure mode's answer (`local`: the memory backend's peek),
  /// marked degraded. Thread-safe.
  decision peek(std::string_view key, const policy& p, std::uint64_t cost,
                std::error_code& ec) noexcept;
  /// peek() that throws std::system_error for invalid input.
  decision peek(std::string_view key, const policy& p, std::uint64_t cost = 1);
  /// Asynchronous peek(). Completion signature `void(std::error_code, sluice::decision)`,
  /// the error set only for invalid input; the handler runs as async_check's does (never
  /// inline, on its associated executor). Completion tokens as for async_check.
  template <class CompletionToken>
  auto async_peek(std::string_view key, const policy& p, std::uint64_t cost,
                  CompletionToken&& token) {
    return async_operate(key, p, key_operation::peek, cost, std::forward<CompletionToken>(token));
  }

  /// Applies a key operation (sluice::key_operation; `amount`: refund's and penalize's
  /// units, 1..limit_of(p), block's milliseconds, 1 ms..max_window, ignored by reset), one
  /// atomic step on the primary backend. An operation is not a decision, so no failure mode
  /// applies: `ec` is set for invalid input (sluice::errc) and for backend trouble. Returns
  /// what a check of 1 sees right after (a blocked key: denied, retry_after = the rest of
  /// the block). Forgets the key's cached denials. Thread-safe.
  decision operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                   std::error_code& ec) noexcept;

  /// Forget `key`: it decides as a new key.
  decision reset(std::string_view key, const policy& p, std::error_code& ec) noexcept {
    return operate(key, p, key_operation::reset, 0, ec);
  }
  /// Give `amount` back (never more than if nothing had been spent).
  decision refund(std::string_view key, const policy& p, std::uint64_t amount,
                  std::error_code& ec) noexcept {
    return operate(key, p, key_operation::refund, amount, ec);
  }
  /// Spend `amount` whatever is left: the client waits longer.
  decision penalize(std::string_view key, const policy& p, std::uint64_t amount,
                    std::error_code& ec) noexcept {
    return operate(key, p, key_operation::penalize, amount, ec);
  }
  /// Deny `key` for `d`, whatever its state; afterwards it starts afresh.
  decision block(std::string_view key, const policy& p, std::chrono::milliseconds d,
                 std::error_code& ec) noexcept {
    return operate(key, p, key_operation::block, static_cast<std::uint64_t>(d.count()), ec);
  }

  /// Asynchronous operate(). Completion signature `void(std::error_code, sluice::decision)`:
  /// the error is set for invalid input and for backend trouble, as operate() sets it
  /// (key_operation::peek: only for invalid input, as peek()). The handler runs as
  /// async_check's does (never inline, on its associated executor); completion tokens as
  /// for async_check. Thread-safe.
  template <class CompletionToken>
  auto async_operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                     CompletionToken&& token) {
    return initiate_decision(std::forward<CompletionToken>(token),
                             [this, k = std::string(key), p, op, amount](decide_handler done) {
                               start_operate(k, p, op, amount, std::move(done));
                             });
  }
  /// Asynchronous reset(), refund(), penalize() and block(): async_operate() of each.
  template <class CompletionToken>
  auto async_reset(std::string_view key, const policy& p, CompletionToken&& token) {
    return async_operate(key, p, key_operation::reset, 0, std::forward<CompletionToken>(token));
  }
  template <class CompletionToken>
  auto async_refund(std::string_view key, const policy& p, std::uint64_t amount,
                    CompletionToken&& token) {
    return async_operate(key, p, key_operation::refund, amount,
                         std::forward<CompletionToken>(token));
  }
  template <class CompletionToken>
  auto async_penalize(std::string_view key, const policy& p, std::uint64_t amount,
                      CompletionToken&& token) {
    return async_operate(key, p, key_operation::penalize, amount,
                         std::forward<CompletionToken>(token));
  }
  template <class CompletionToken>
  auto async_block(std::string_view key, const policy& p, std::chrono::milliseconds d,
                   CompletionToken&& token) {
    return async_operate(key, p, key_operation::block, static_cast<std::uint64_t>(d.count()),
                         std::forward<CompletionToken>(token));
  }
  /// async_operate() that calls `done` where the backend completes it, as the
  /// on_backend_thread async_check().
  void async_operate(on_backend_thread_t, std::string_view key, const policy& p, key_operation op,
                     std::uint64_t amount, decide_handler done) {
    start_operate(key, p, op, amount, std::move(done));
  }

  limiter_stats stats() const noexcept;
  /// Quota leases per policy: each policy that has leased (told apart by what leases
  /// depend on: algorithm, capacity, refill, limit, window and lease_ttl), in the order it
  /// first leased, with its counters. The first 1,024 such policies are kept apart; the
  /// leases of any after them count in stats() only.
  std::vector<std::pair<policy, lease_stats>> lease_stats_by_policy() const;
  /// The primary backend's counters (Redis calls, batching, redirections, failovers).
  sluice::backend_stats backend_stats() const noexcept;

  // Concurrency limits (sluice/concurrency.hpp, docs/CONCURRENCY.md), defined in
  // src/core/limiter_slots.cpp.

  /// Takes a slot of `key` if fewer than p.limit hold it: a held slot, or a refusal that
  /// says when to retry (the slot's operator bool tells which). One step on the primary
  /// backend, waited for: not on a thread the backend's I/O runs on. Backend trouble yields
  /// the failure mode's slot, marked degraded. `ec` is set only for invalid input (the
  /// slot is then not held). Thread-safe.
  slot try_acquire(std::string_view key, const concurrency_policy& p, std::error_code& ec);
  /// try_acquire() that throws std::system_error for invalid input.
  slot try_acquire(std::string_view key, const concurrency_policy& p);
  /// async_acquire(), waited for: blocks this thread (not one the backend's I/O runs on)
  /// until it completes. `ec` is set only for invalid input.
  slot acquire(std::string_view key, const concurrency_policy& p,
               std::chrono::milliseconds max_wait, std::error_code& ec);
  slot acquire(std::string_view key, const concurrency_policy& p,
               std::chrono::milliseconds max_wait);

  /// Asynchronous try_acquire(). Completion signature `void(std::error_code, sluice::slot)`,
  /// the error set only for invalid input. The handler never runs inline: it is posted to
  /// its associated executor (default: boost::asio::system_executor), as async_check's.
  /// A slot whose handler is destroyed without running is released.
  template <class CompletionToken>
  auto async_try_acquire(std::string_view key, const concurrency_policy& p,
                         CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, slot)>(
        [this](auto handler, std::string k, concurrency_policy pol) {
          start_acquire(
              k, pol,
              [parked = detail::parked_handler(std::move(handler))](std::error_code ec, slot s) {
                // A posted completion may be copied (post_completion groups some
                // in a std::function), a slot cannot: it travels in a shared_ptr.
                parked.post([ec, got = std::make_shared<slot>(std::move(s))](auto& h) {
                  h(ec, std::move(*got));
                });
              });
        },
        token, std::string(key), p);
  }
  /// Waits for a slot of `key` up to `max_wait`: the slot, or the refusal of an attempt
  /// made at the deadline (over the limit is a value, not an error). The waiters of one
  /// key in this limiter (its copies included) queue in arrival order: the first polls the
  /// backend, with a backoff growing from 1 ms to 50 ms, random jitter and never past the
  /// refusal's retry_after (slots freed by other processes, or by leases that ended); a
  /// slot released through this limiter (slot::release, its destructor, slot_step) wakes
  /// the first idle waiter at once, one waiter per freed slot. A degraded answer completes
  /// at once. No thread is blocked: the timers run on the handler's associated executor.
  /// Completion signature `void(std::error_code, sluice::slot)`: the error is set for
  /// invalid input, and std::errc::operation_canceled when every handle to this limiter
  /// is destroyed while the wait is pending (a slot got then is released). The handler
  /// never runs inline: it is posted to its associated executor (default:
  /// boost::asio::system_executor). Thread-safe.
  template <class CompletionToken>
  auto async_acquire(std::string_view key, const concurrency_policy& p,
                     std::chrono::milliseconds max_wait, CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, slot)>(
        [this](auto handler, std::string k, concurrency_policy pol, std::chrono::milliseconds mw) {
          auto ex = boost::asio::get_associated_executor(handler, boost::asio::system_executor());
          start_wait(
              std::move(k), pol, mw, boost::asio::any_io_executor(ex),
              [parked = detail::parked_handler(std::move(handler))](std::error_code ec, slot s) {
                parked.post([ec, got = std::make_shared<slot>(std::move(s))](auto& h) {
                  h(ec, std::move(*got));
                });
              });
        },
        token, std::string(key), p, max_wait);
  }

  /// async_try_acquire() that calls `done` where the backend completes it, as the
  /// on_backend_thread async_check().
  void async_try_acquire(on_backend_thread_t, std::string_view key, const concurrency_policy& p,
                         std::function<void(std::error_code, slot)> done) {
    start_acquire(key, p, std::move(done));
  }

  /// Releases or renews (`op`) the slot `id` of `key` by id: for a slot that was detached
  /// (slot::detach) and handed to someone else, e.g. a sluiced client. `done` gets the
  /// step's reply (held: it was held and is released, or renewed) or an error: invalid
  /// input (a malformed id: errc::invalid_slot_id; `op` acquire: errc::unsupported_operation)
  /// or the backend's trouble. With failure mode `local` the step also reaches the
  /// fallback backend, where slots taken while the backend failed are. Called where the
  /// backend completes it, as the on_backend_thread async_check(). Thread-safe.
  void async_slot_step(on_backend_thread_t, std::string_view key, const concurrency_policy& p,
                       slot_operation op, std::string_view id, slot_handler done);
  /// async_slot_step(), waited for (not on a thread the backend's I/O runs on).
  slot_reply slot_step(std::string_view key, const concurrency_policy& p, slot_operation op,
                       std::string_view id, std::error_code& ec);

  /// What this limiter's concurrency limits did (its copies' and its slots' included).
  sluice::slot_stats slot_stats() const noexcept;

 private:
  struct state;
  /// A check_item that owns its key (what async_check_all keeps while it runs).
  struct owned_check_item {
    std::string key;
    sluice::policy policy;
    std::uint64_t cost = 1;
  };
  // Every single-key async form: `start` begins the operation with a handler that posts
  // the completion to the user handler's associated executor (see async_check).
  template <class CompletionToken, class Start>
  static auto initiate_decision(CompletionToken&& token, Start start) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, decision)>(
        [](auto handler, Start begin) {
          begin(
              [parked = detail::parked_handler(std::move(handler))](
                  std::error_code ec, decision d) { parked.post([ec, d](auto& h) { h(ec, d); }); });
        },
        token, std::move(start));
  }

  // `policy_valid`: `p` is a valid_policy's, so only the key and the cost are checked.
  void start_check(std::string_view key, const policy& p, std::uint64_t cost, bool policy_valid,
                   decide_handler done) const;
  decision check_input(std::string_view key, const policy& p, std::uint64_t cost, bool policy_valid,
                       std::error_code& ec) noexcept;
  void start_operate(std::string_view key, const policy& p, key_operation op, std::uint64_t amount,
                     decide_handler done) const;
  void start_check_all(std::vector<owned_check_item> items, decide_all_handler done);
  /// The items with their keys copied, for a check that outlives the caller's views.
  static std::vector<owned_check_item> own(std::span<const check_item> items);
  std::shared_ptr<state> state_;

  // Concurrency limits (src/core/limiter_slots.cpp): their counters, shared by copies.
  using acquire_handler = std::function<void(std::error_code, slot)>;
  void start_acquire(std::string_view key, const concurrency_policy& p, acquire_handler done) const;
  /// The primary (or the fallback) backend, which slots are taken from.
  const std::shared_ptr<backend>& slot_backend(bool fallback) const noexcept;
  /// The slot (or the refusal) that an acquire's answer from `primary` makes: the backend's
  /// error `bec` goes through the policy's failure mode (`local` asks `fallback`).
  static slot make_slot(const std::shared_ptr<detail::slot_counters>& counters,
                        const std::shared_ptr<backend>& primary,
                        const std::shared_ptr<backend>& fallback, std::string_view key,
                        const concurrency_policy& p, const std::array<char, 32>& id,
                        std::error_code bec, const slot_reply& r);
  static std::shared_ptr<detail::slot_counters> make_slot_counters();
  std::shared_ptr<detail::slot_counters> slots_ = make_slot_counters();

  // Waiting for a slot (src/core/limiter_wait.cpp). `done` is called once, not posted.
  void start_wait(std::string key, const concurrency_policy& p, std::chrono::milliseconds max_wait,
                  boost::asio::any_io_executor ex, acquire_handler done) const;
  /// Completes this limiter's waiters (std::errc::operation_canceled) when the last handle
  /// to it is destroyed: the waiters' own copies do not hold it.
  static std::shared_ptr<void> make_wait_guard(const std::shared_ptr<detail::slot_counters>& c);
  std::shared_ptr<void> wait_guard_ = make_wait_guard(slots_);
};

}  // namespace sluice
