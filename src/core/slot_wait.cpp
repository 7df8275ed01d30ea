#include "core/slot_wait.hpp"

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include <boost/asio/error.hpp>
#include <boost/asio/steady_timer.hpp>

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

constexpr milliseconds first_backoff{1};
constexpr milliseconds max_backoff{50};

std::error_code canceled() { return std::make_error_code(std::errc::operation_canceled); }

}  // namespace

class slot_waiter : public std::enable_shared_from_this<slot_waiter> {
 public:
  using handler = std::function<void(std::error_code, slot)>;

  slot_waiter(std::shared_ptr<slot_waitlist> list, slot_attempt attempt, std::string key,
              boost::asio::any_io_executor ex, handler done)
      : list_(std::move(list)),
        attempt_(std::move(attempt)),
        key_(std::move(key)),
        timer_(std::move(ex)),
        done_(std::move(done)) {}

  void start(milliseconds max_wait) {
    deadline_ = steady::now() + std::max(max_wait, milliseconds{0});
    {
      std::unique_lock lock(list_->mu_);
      if (list_->closed_) {
        lock.unlock();
        finish_unlocked(canceled(), slot{});
        return;
      }
      final_ = max_wait <= milliseconds{0};
      if (!final_) {
        // In line from arrival, also while the first attempt is in flight: a caller that
        // arrives meanwhile queues behind this one, not ahead of it when this one's
        // refusal comes back.
        auto it = list_->queues_.find(key_);
        const bool others = it != list_->queues_.end() && !it->second.empty();
        enqueue_locked();
        if (others) {
          // Behind the waiters already there, without asking the backend: a slot freed
          // here goes to them first.
          arm_locked();
          return;
        }
      }
      phase_ = phase::attempting;
    }
    try_once();
  }

  /// Under the lock: whether released() may hand this waiter the freed slot.
  bool idle_locked() const noexcept { return phase_ == phase::idle; }

  /// Under the lock, for a release of this waiter's key: true when the caller is to start
  /// this waiter's attempt (after unlocking); false when the release is spoken for without
  /// an attempt (owed to this waiter's attempt in flight) or is not this waiter's to take.
  /// A waiter whose attempt is in flight (its own poll, or one an earlier release started)
  /// may have asked before this slot was freed: it is owed the wake-up (it tries again at
  /// once if refused, or passes the wake-up on if served), so a later waiter does not
  /// overtake it. One wake-up is owed at most: a further release goes to the next in line.
  bool take_release_locked(bool& spoken_for) {
    spoken_for = false;
    if (phase_ == phase::idle) {
      phase_ = phase::attempting;
      ++generation_;
      timer_.cancel();
      return true;
    }
    if (phase_ == phase::attempting && !owed_wake_) {
      owed_wake_ = true;
      spoken_for = true;
    }
    return false;
  }

  /// Under the lock, for close(): true when this waiter is to be completed by the caller
  /// (it was idle); one with an attempt in flight completes when the attempt does.
  bool cancel_locked() {
    canceled_ = true;
    queued_ = false;
    ++generation_;
    timer_.cancel();
    if (phase_ != phase::idle) return false;
    phase_ = phase::done;
    return true;
  }

  void try_once() {
    attempt_([self = shared_from_this()](std::error_code ec, slot s) {
      self->on_result(ec, std::move(s));
    });
  }

  /// Out of the queue and completed with `ec` (an attempt that could not start).
  void abandon(std::error_code ec) noexcept {
    {
      std::lock_guard lock(list_->mu_);
      phase_ = phase::done;
      leave_locked();
    }
    finish_unlocked(ec, slot{});
  }

  void finish_unlocked(std::error_code ec, slot s) noexcept {
    // attempt_ stays: this may run inside it (the memory backend answers inline). The
    // waitlist no longer holds this waiter, so the limiter copy in attempt_ goes with it.
    auto done = std::move(done_);
    // The handlers the limiter passes only move the slot and post (or notify): they do not
    // throw but for want of memory, which leaves nothing better to do than to drop it.
    try {
      if (done) done(ec, std::move(s));
    } catch (...) {
    }
  }

 private:
  enum class phase { attempting, idle, done };

  void on_result(std::error_code ec, slot s) {
    std::unique_lock lock(list_->mu_);
    const bool owed = std::exchange(owed_wake_, false);
    if (canceled_ || list_->closed_) {
      phase_ = phase::done;
      leave_locked();
      lock.unlock();
      s = slot{};  // a slot got after the limiter went away is given back, unlocked
      finish_unlocked(canceled(), slot{});
      return;
    }
    if (ec || s || s.degraded() || final_ || steady::now() >= deadline_) {
      phase_ = phase::done;
      leave_locked();
      // A wake-up owed to this waiter that it no longer needs goes to the next in line.
      auto next = owed ? list_->take_release_locked(key_) : nullptr;
      lock.unlock();
      finish_unlocked(ec, std::move(s));
      if (next) next->start_woken();
      return;
    }
    if (owed) {
      // Refused, but a slot was freed while this attempt was in flight: ask again at once.
      lock.unlock();
      s = slot{};
      start_woken();
      return;
    }
    // Refused: wait in line (a woken waiter keeps its place).
    phase_ = phase::idle;
    retry_after_ = s.retry_after();
    if (!queued_) enqueue_locked();
    arm_locked();
    lock.unlock();
    // `s` (refused: holds nothing) is destroyed here, unlocked.
  }

 public:
  /// The attempt of a waiter woken by a release (take_release_locked returned true, or its
  /// owed wake-up came due), started outside the lock.
  void start_woken() noexcept {
    try {
      try_once();
    } catch (...) {
      // No memory to start the attempt: its timer is stopped, so nothing else would ever
      // complete it.
      abandon(std::make_error_code(std::errc::not_enough_memory));
    }
  }

 private:
  bool head_locked() const {
    auto it = list_->queues_.find(key_);
    return it != list_->queues_.end() && !it->second.empty() && it->second.front().get() == this;
  }

  void enqueue_locked() {
    list_->queues_[key_].push_back(shared_from_this());
    list_->waiting_.fetch_add(1, std::memory_order_relaxed);
    queued_ = true;
  }

  // Out of the queue; a new first waiter that is idle starts polling.
  void leave_locked() {
    ++generation_;
    timer_.cancel();
    if (!queued_) return;
    queued_ = false;
    list_->waiting_.fetch_sub(1, std::memory_order_relaxed);
    auto it = list_->queues_.find(key_);
    if (it == list_->queues_.end()) return;
    auto& q = it->second;
    const bool was_head = !q.empty() && q.front().get() == this;
    q.remove_if([this](const auto& w) { return w.get() == this; });
    if (q.empty()) {
      list_->queues_.erase(it);
    } else if (was_head && q.front()->phase_ == phase::idle) {
      q.front()->backoff_ = first_backoff;  // more slots may be free: look soon
      q.front()->arm_locked();
    }
  }

  // The next attempt: the first waiter polls (backoff with jitter, never past the last
  // refusal's retry_after), the others wait for a wake-up; everyone tries at its deadline.
  void arm_locked() {
    auto at = deadline_;
    if (head_locked()) {
      // Jitter only spreads the waiters of several processes out: no secret in it.
      thread_local std::minstd_rand jitter{std::random_device{}()};
      std::uniform_int_distribution<milliseconds::rep> pick(
          std::max<milliseconds::rep>(1, backoff_.count() / 2), backoff_.count());
      const auto wait =
          std::min(milliseconds{pick(jitter)}, std::max(retry_after_, milliseconds{1}));
      at = std::min(at, steady::now() + wait);
      backoff_ = std::min(backoff_ * 2, max_backoff);
    }
    const auto gen = ++generation_;
    timer_.expires_at(at);
    timer_.async_wait(
        [self = shared_from_this(), gen](boost::system::error_code) { self->on_timer(gen); });
  }

  void on_timer(std::uint64_t gen) {
    {
      std::lock_guard lock(list_->mu_);
      // A stale timer (woken, re-armed or cancelled since) does nothing.
      if (gen != generation_ || phase_ != phase::idle) return;
      if (steady::now() >= deadline_) final_ = true;
      phase_ = phase::attempting;
    }
    try_once();
  }

  std::shared_ptr<slot_waitlist> list_;
  slot_attempt attempt_;
  std::string key_;
  boost::asio::steady_timer timer_;
  handler done_;
  steady::time_point deadline_{};
  milliseconds backoff_{first_backoff};
  milliseconds retry_after_{0};
  std::uint64_t generation_ = 0;  // which timer wait is current
  phase phase_ = phase::idle;
  bool queued_ = false;
  bool final_ = false;      // the deadline passed: the attempt in flight decides
  bool owed_wake_ = false;  // a release came while this waiter's attempt was in flight
  bool canceled_ = false;
};

std::shared_ptr<slot_waiter> slot_waitlist::take_release_locked(std::string_view key) {
  auto it = queues_.find(key);
  if (it == queues_.end()) return nullptr;
  // The first waiter that can use the release takes it, in arrival order.
  for (const auto& w : it->second) {
    bool spoken_for = false;
    if (w->take_release_locked(spoken_for)) return w;
    if (spoken_for) return nullptr;
  }
  return nullptr;
}

void slot_waitlist::released(std::string_view key) noexcept {
  if (waiting_.load(std::memory_order_relaxed) == 0) return;
  std::shared_ptr<slot_waiter> woken;
  {
    std::lock_guard lock(mu_);
    woken = take_release_locked(key);
  }
  if (woken) woken->start_woken();
}

void slot_waitlist::close() noexcept {
  std::vector<std::shared_ptr<slot_waiter>> to_complete;
  {
    std::lock_guard lock(mu_);
    closed_ = true;
    for (auto& [key, q] : queues_) {
      for (auto& w : q) {
        if (w->cancel_locked()) to_complete.push_back(w);
      }
    }
    queues_.clear();
    waiting_.store(0, std::memory_order_relaxed);
  }
  for (auto& w : to_complete) w->finish_unlocked(canceled(), slot{});
}

void start_slot_wait(std::shared_ptr<slot_waitlist> list, slot_attempt attempt, std::string key,
                     milliseconds max_wait, boost::asio::any_io_executor ex,
                     std::function<void(std::error_code, slot)> done) {
  auto w = std::make_shared<slot_waiter>(std::move(list), std::move(attempt), std::move(key),
                                         std::move(ex), std::move(done));
  w->start(max_wait);
}

}  // namespace sluice::detail
