#pragma once
// The blocking decide() of a backend whose decisions complete on its own I/O thread: start
// the asynchronous decision and wait for it, at most `limit` (a safety net: the backend's own
// deadline normally completes the call well before).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <vector>

#include <sluice/backend.hpp>
#include <sluice/error.hpp>

namespace sluice::detail {

/// `start(decide_handler)` begins the decision; the handler may run on any thread.
template <class Start>
std::error_code await_decision(Start&& start, std::chrono::nanoseconds limit, decision& out) {
  // Shared, because a late completion may outlive this call after the limit passed.
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    decision d;
  };
  auto w = std::make_shared<waiter>();
  start([w](std::error_code ec, decision d) {
    std::lock_guard lock(w->mu);
    w->ec = ec;
    w->d = d;
    w->done = true;
    w->cv.notify_one();
  });
  std::unique_lock lock(w->mu);
  if (!w->cv.wait_for(lock, limit, [&] { return w->done; })) return errc::backend_timeout;
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
