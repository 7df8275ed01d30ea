#pragma once
/// Concurrency limits (docs/CONCURRENCY.md): at most `limit` holders of one key at once.
/// A holder gets a sluice::slot, which it gives back when done; a slot is held for a lease
/// (`lease_ttl`) that ends unless it is renewed, so a process that dies while holding slots
/// frees them when their leases end. limiter::try_acquire, async_try_acquire and acquire
/// (sluice/limiter.hpp) take them.
#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/system_executor.hpp>
#include <sluice/backend.hpp>
#include <sluice/completion.hpp>
#include <sluice/policy.hpp>

namespace sluice {

/// The largest concurrency_policy::limit: a key's holders are scanned on every step (in
/// memory; a sorted set on Redis), so a limit stays small.
inline constexpr std::uint64_t max_concurrency_limit = 100'000;

/// What a concurrency limit is. Validated by validate(); the limiter refuses an invalid one
/// (errc::invalid_limit, errc::invalid_lease_ttl) before anything reaches a backend.
struct concurrency_policy {
  /// At most this many holders at once: 1..max_concurrency_limit. A lowered limit takes
  /// effect as slots free (holders above it keep their slots).
  std::uint64_t limit = 1;
  /// How long a slot is held unless renewed (slot::renew): 1 ms..max_lease_ttl. A holder
  /// that dies keeps its slot this long at most.
  std::chrono::milliseconds lease_ttl{30'000};
  /// What an acquire gets when the backend fails: `open` a slot held by no backend (marked
  /// degraded), `closed` a refusal (degraded), `local` a slot of the limiter's in-process
  /// fallback backend (degraded): a limit per process instead of one for the fleet.
  failure_mode on_failure = failure_mode::open;
};

/// An empty error_code when `p` is usable; else errc::invalid_limit or errc::invalid_lease_ttl.
std::error_code validate(const concurrency_policy& p) noexcept;
/// validate(p), then the key: non-empty, at most max_key_size bytes.
std::error_code validate(std::string_view key, const concurrency_policy& p) noexcept;

/// Counts of what a limiter's concurrency limits did, for metrics (limiter::slot_stats()).
/// Monotonic.
struct slot_stats {
  std::uint64_t acquired = 0;  ///< acquires that got a slot (degraded ones included)
  std::uint64_t refused = 0;   ///< acquires refused: the limit was reached, or `closed`
  /// Held slots given back: by release() or the destructor (counted when sent), or by id
  /// with limiter::slot_step (counted when the backend found it held).
  std::uint64_t released = 0;
  std::uint64_t renewed = 0;  ///< renewals that kept their slot
  /// Renewals that did not: the lease had ended (the slot may be someone else's now), or
  /// the backend failed. A lease that ended is only seen this way (or never, when its holder
  /// died): there is no count of leases that expired.
  std::uint64_t renew_failures = 0;
  std::uint64_t invalid = 0;  ///< calls refused for invalid input
  std::uint64_t degraded_open = 0;
  std::uint64_t degraded_closed = 0;
  std::uint64_t degraded_local = 0;
  std::uint64_t backend_errors = 0;
};

namespace detail {
struct slot_counters;
}

/// One slot of a concurrency limit, or the refusal of one. Movable, not copyable; a held
/// slot is released when it is destroyed or assigned over. Like any value, one slot is not
/// for two threads at once; different slots are independent.
class slot {
 public:
  /// Not held.
  slot() noexcept = default;
  slot(slot&& other) noexcept;
  /// Releases the slot held here (if any), then takes `other`'s.
  slot& operator=(slot&& other) noexcept;
  slot(const slot&) = delete;
  slot& operator=(const slot&) = delete;
  /// Releases a held slot (without waiting for the backend: see release()).
  ~slot();

  /// Whether this holds a slot: acquired and neither released, detached nor found ended by
  /// renew().
  explicit operator bool() const noexcept { return held_; }
  bool held() const noexcept { return held_; }

  /// Gives the slot back. Sent without waiting for the answer (on Redis, the release is
  /// queued and this returns at once); when it cannot reach the backend, the lease ends
  /// by itself. Harmless when not held, or when the lease had ended. Never throws.
  void release() noexcept;

  /// Extends the lease to lease_ttl from now, on the backend (one round trip: blocks; not
  /// on a thread that the backend's I/O runs on). True when the slot is still held. False
  /// when the lease had ended (the slot may be another holder's since: this one is then no
  /// longer held, and must not go on as if it were), or when the backend failed (`ec` says
  /// so; the slot stays held here, so that it is released later). A degraded `open` slot,
  /// held by no backend, renews to true without asking. Not held: false.
  bool renew(std::error_code& ec);
  bool renew();

  /// Asynchronous release(): gives the slot back and completes when the backend has
  /// answered. Completion signature `void(std::error_code)`: the backend's error (the lease
  /// then ends by itself), or none (also when the slot was not held, had ended, or is held
  /// by no backend). The slot is not held from the call on. The handler never runs inline:
  /// it is posted to its associated executor (default: boost::asio::system_executor).
  template <class CompletionToken>
  auto async_release(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code)>(
        [this](auto handler) {
          start_release([parked = detail::parked_handler(std::move(handler))](std::error_code ec) {
            parked.post([ec](auto& h) { h(ec); });
          });
        },
        token);
  }

  /// Asynchronous renew(). Completion signature `void(std::error_code, bool still_held)`,
  /// as renew(ec) answers: still_held false with no error when the lease had ended (the slot
  /// is then no longer held here); an error when the backend failed (the slot stays held).
  /// This slot must stay where it is, unused, until the handler runs: the answer is written
  /// into it (in_flight(), expires_in(), held()) on the handler's executor, just before the
  /// handler is called. The handler never runs inline: it is posted to its associated
  /// executor (default: boost::asio::system_executor).
  template <class CompletionToken>
  auto async_renew(CompletionToken&& token) {
    return boost::asio::async_initiate<CompletionToken, void(std::error_code, bool)>(
        [this](auto handler) {
          start_renew([this, parked = detail::parked_handler(std::move(handler))](
                          std::error_code bec, slot_reply r) {
            parked.post([this, bec, r](auto& h) {
              std::error_code ec;
              const bool held = finish_renew(bec, r, ec);
              h(ec, held);
            });
          });
        },
        token);
  }

  /// Stops owning the slot without releasing it, and returns its id (empty when not held or
  /// held by no backend): its lease goes on until released by id (limiter::slot_step) or
  /// it ends. For a slot handed to someone else, e.g. sluiced's POST /v1/acquire.
  std::string detach();

  /// Holders of the key after the acquire (or the last renew), this one included when held.
  std::uint64_t in_flight() const noexcept { return in_flight_; }
  /// The policy's limit.
  std::uint64_t limit() const noexcept { return limit_; }
  /// Refused: when a lease ends at the latest (a slot may free sooner, when a holder
  /// releases it). 0 when held.
  std::chrono::milliseconds retry_after() const noexcept { return retry_after_; }
  /// Held: how long the lease runs from the acquire (or the last renew).
  std::chrono::milliseconds expires_in() const noexcept { return expires_in_; }
  /// True when the failure mode decided because the backend failed (backend_error() says why).
  bool degraded() const noexcept { return degraded_; }
  std::error_code backend_error() const noexcept { return backend_error_; }
  /// The slot's id: 32 lowercase hex digits of 128 random bits. Empty when refused or held by
  /// no backend (degraded `open`).
  std::string_view id() const noexcept { return {id_.data(), id_size_}; }
  /// The key the slot is of.
  const std::string& key() const noexcept { return key_; }

 private:
  friend class limiter;
  void clear() noexcept;
  /// The release step, sent; `done` gets the backend's error, where the backend completes
  /// (inline when the slot holds nothing to send). The slot is cleared at once.
  void start_release(std::function<void(std::error_code)> done) noexcept;
  /// The renew step, sent (the one path of renew() and async_renew()); `done` gets the
  /// backend's answer where the backend completes it, or a made-up one (inline) when there
  /// is nothing to ask: not held, or held by no backend.
  void start_renew(std::function<void(std::error_code, slot_reply)> done);
  /// Applies a renew step's answer to this slot and the counters: still held or not, and
  /// `ec` (the backend's error `bec`).
  bool finish_renew(std::error_code bec, const slot_reply& r, std::error_code& ec) noexcept;

  std::shared_ptr<detail::slot_counters> counters_;
  std::shared_ptr<backend> on_;  // holds the record; null when refused or degraded `open`
  std::string key_;
  // In place, not a std::string: 32 characters would be an allocation on every acquire.
  std::array<char, 32> id_{};
  std::uint8_t id_size_ = 0;  // 0 or 32
  std::chrono::milliseconds lease_ttl_{0};
  bool held_ = false;
  bool degraded_ = false;
  std::error_code backend_error_;
  std::uint64_t in_flight_ = 0;
  std::uint64_t limit_ = 0;
  std::chrono::milliseconds retry_after_{0};
  std::chrono::milliseconds expires_in_{0};
};

}  // namespace sluice
