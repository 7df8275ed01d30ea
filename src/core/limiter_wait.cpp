// The limiter's waits for a slot (limiter::async_acquire, limiter::acquire): the waiter's
// queue and wake-up are in slot_wait.cpp; here the limiter's side of it.
#include <sluice/limiter.hpp>

#include <boost/asio/system_executor.hpp>

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "core/slot_support.hpp"
#include "core/slot_wait.hpp"

namespace sluice {

std::shared_ptr<void> limiter::make_wait_guard(const std::shared_ptr<detail::slot_counters>& c) {
  // Not the counters themselves: every slot holds those, and outlives the limiter.
  return std::shared_ptr<void>(c.get(), [w = std::weak_ptr<detail::slot_counters>(c)](void*) {
    if (auto counters = w.lock()) counters->waitlist.close();
  });
}

void limiter::start_wait(std::string key, const concurrency_policy& p,
                         std::chrono::milliseconds max_wait, boost::asio::any_io_executor ex,
                         acquire_handler done) const {
  if (auto ec = validate(key, p)) {
    detail::slot_counters::add(slots_->invalid);
    done(ec, slot{});
    return;
  }
  // The waiter's own handle: without the guard, so that a pending wait does not keep the
  // limiter from being "destroyed" (and its waiters from being completed).
  limiter self = *this;
  self.wait_guard_.reset();
  auto attempt = [self = std::move(self), key, p](acquire_handler once) {
    self.start_acquire(key, p, std::move(once));
  };
  // Aliases the counters, which hold the waitlist.
  std::shared_ptr<detail::slot_waitlist> list(slots_, &slots_->waitlist);
  detail::start_slot_wait(std::move(list), std::move(attempt), std::move(key), max_wait,
                          std::move(ex), std::move(done));
}

slot limiter::acquire(std::string_view key, const concurrency_policy& p,
                      std::chrono::milliseconds max_wait, std::error_code& ec) {
  // Shared with the handler, which runs on another thread (a timer's, the backend's) and
  // may still be unlocking the mutex when this returns.
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::error_code ec;
    slot s;
  };
  auto w = std::make_shared<waiter>();
  // The timers run on Asio's system executor (its own threads): this thread only waits.
  start_wait(std::string(key), p, max_wait,
             boost::asio::any_io_executor(boost::asio::system_executor()),
             [w](std::error_code e, slot s) {
               std::lock_guard lock(w->mu);
               w->ec = e;
               w->s = std::move(s);
               w->done = true;
               w->cv.notify_one();
             });
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->done; });
  ec = w->ec;
  return std::move(w->s);
}

slot limiter::acquire(std::string_view key, const concurrency_policy& p,
                      std::chrono::milliseconds max_wait) {
  std::error_code ec;
  auto s = acquire(key, p, max_wait, ec);
  if (ec) throw std::system_error(ec);
  return s;
}

}  // namespace sluice
