#pragma once
// The blocking decide() of a backend whose decisions complete on its own I/O thread: start
// the asynchronous decision and wait for it, at most `limit` (a safety net: the backend's own
// deadline normally completes the call well before).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>

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

}  // namespace sluice::detail
