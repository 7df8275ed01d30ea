#pragma once
// Waiting for a slot (limiter::async_acquire, limiter::acquire), private. A limiter's
// waiters for one key stand in a FIFO queue: only the first one polls the backend (with
// backoff and jitter, for slots freed elsewhere: by another process, or by a lease that
// ended); the others wait for their turn or for a wake-up. A release through the same
// limiter (slot::release, limiter::slot_step) wakes the first idle waiter of its key at
// once: one waiter per freed slot. If the first waiter's attempt is in flight (it may have
// asked before the slot was freed), the release is its: it asks again at once if refused,
// or passes the wake-up on if served, so nobody overtakes it. The queue lives in the limiter's
// slot_counters, which every slot of the limiter holds, so a release finds it without a lookup.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>

#include <boost/asio/any_io_executor.hpp>

#include <sluice/concurrency.hpp>

namespace sluice::detail {

class slot_waiter;

/// The waiters of one limiter, per key, in arrival order. Thread-safe.
class slot_waitlist {
 public:
  /// A slot of `key` was given back through this limiter: the first idle waiter of `key`
  /// tries at once. Costs one relaxed load when nobody waits (it is on every release).
  void released(std::string_view key) noexcept;
  /// The limiter is gone: every waiter completes with std::errc::operation_canceled (one
  /// whose attempt is in flight, when that attempt ends; a slot it got is released), and
  /// no waiter joins after.
  void close() noexcept;

 private:
  friend class slot_waiter;
  // Under mu_: the waiter of `key` to start for a release, or none (nobody waits, or the
  // release is owed to a waiter whose poll is in flight).
  std::shared_ptr<slot_waiter> take_release_locked(std::string_view key);
  // Guards the queues and every waiter's state (including its timer, which is not
  // thread-safe): one lock per limiter keeps the hand-offs between waiters simple, and
  // nothing slow runs under it (attempts and completions are started after unlocking).
  std::mutex mu_;
  std::map<std::string, std::list<std::shared_ptr<slot_waiter>>, std::less<>> queues_;
  std::atomic<std::size_t> waiting_{0};
  bool closed_ = false;
};

/// One step of try_acquire (limiter::start_acquire), calling its handler once.
using slot_attempt = std::function<void(std::function<void(std::error_code, slot)>)>;

/// Starts waiting for a slot of `key` up to `max_wait` (at least one attempt, and one at
/// the deadline). `done` is called exactly once, where the deciding attempt completes or
/// on a thread of `ex` (a timer), never inline for a wait that had to queue. Timers run on
/// `ex`; no thread is blocked.
void start_slot_wait(std::shared_ptr<slot_waitlist> list, slot_attempt attempt, std::string key,
                     std::chrono::milliseconds max_wait, boost::asio::any_io_executor ex,
                     std::function<void(std::error_code, slot)> done);

}  // namespace sluice::detail
