#pragma once
// The blocking decide() of a backend whose decisions complete on its own I/O thread: start
// the asynchronous decision and wait for it, at most `limit` (a safety net: the backend's own
// deadline normally completes the call well before).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <sluice/backend.hpp>
#include <sluice/error.hpp>

namespace sluice::detail {

// How long a blocking call polls for its answer before it sleeps, and how many calls may poll
// at once. A Redis round trip on loopback takes a few tens of microseconds; waking a thread
// that sleeps on a futex adds 10-20 us to that on a VM, a third of the whole call. Polling
// with sched_yield in between hands the core to whoever else needs it (Redis itself, on a
// small machine), and the cap keeps many blocked callers from burning every core.
inline constexpr std::chrono::microseconds await_poll_for{200};
inline std::atomic<int> await_pollers{0};

/// `start(decide_handler)` begins the decision; the handler may run on any thread.
template <class Start>
std::error_code await_decision(Start&& start, std::chrono::nanoseconds limit, decision& out) {
  // Shared, because a late completion may outlive this call after the limit passed.
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::atomic<bool> ready{false};  // done, readable without the lock
    std::error_code ec;
    decision d;
  };
  auto w = std::make_shared<waiter>();
  const auto started = std::chrono::steady_clock::now();
  start([w](std::error_code ec, decision d) {
    std::lock_guard lock(w->mu);
    w->ec = ec;
    w->d = d;
    w->done = true;
    w->ready.store(true, std::memory_order_release);
    w->cv.notify_one();
  });
  static const int max_pollers =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency() / 2));
  if (await_pollers.fetch_add(1, std::memory_order_relaxed) < max_pollers) {
    const auto poll_until = started + std::min<std::chrono::nanoseconds>(await_poll_for, limit);
    while (!w->ready.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < poll_until) {
      std::this_thread::yield();
    }
  }
  await_pollers.fetch_sub(1, std::memory_order_relaxed);
  std::unique_lock lock(w->mu);
  if (!w->cv.wait_until(lock, started + limit, [&] { return w->done; })) {
    return errc::backend_timeout;
  }
  out = w->d;
  return w->ec;
}

/// The same for a multi-key decision: `start(decide_all_handler)` begins it; `out` gets the
/// decisions on success.
template <class Start>
std::error_code await_decisions(Start&& start, std::chrono::nanoseconds limit,
                                std::vector<decision>& out) {
  // await_decision carries one decision; the vector travels beside it, shared for the same
  // reason as the waiter (a late completion may outlive this call).
  auto result = std::make_shared<std::vector<decision>>();
  decision unused;
  const auto ec = await_decision(
      [&](decide_handler done) {
        start([result, done = std::move(done)](std::error_code ec, std::vector<decision> ds) {
          *result = std::move(ds);
          done(ec, {});
        });
      },
      limit, unused);
  if (!ec) out = std::move(*result);
  return ec;
}

}  // namespace sluice::detail
