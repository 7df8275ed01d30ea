#include "core/lease_sweeper.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/lease_table.hpp"

namespace sluice::detail {
namespace {

// Leases end at any time; a return this late at most after its end is well within the
// lease_ttl the bound already allows for, and a 40/s wake-up is nothing while units are held.
constexpr auto sweep_period = std::chrono::milliseconds{25};

class sweeper {
 public:
  sweeper() : pid_(::getpid()) {
    std::thread([this] { run(); }).detach();
  }
  pid_t pid() const noexcept { return pid_; }

  void watch(const std::shared_ptr<lease_table>& t) {
    {
      std::lock_guard lock(mu_);
      tables_.push_back(t);
    }
    wake_.notify_one();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return !tables_.empty(); });
      wake_.wait_for(lock, sweep_period);
      auto now_watched = std::move(tables_);
      tables_.clear();
      lock.unlock();
      std::vector<std::weak_ptr<lease_table>> still;
      for (auto& w : now_watched) {
        if (auto t = w.lock(); t && t->sweep_held()) still.push_back(std::move(w));
      }
      lock.lock();
      tables_.insert(tables_.end(), still.begin(), still.end());
    }
  }

  const pid_t pid_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<std::weak_ptr<lease_table>> tables_;
};

// Never destroyed: its thread runs until the process ends. A forked child (which has none
// of its parent's threads) makes its own, and never touches the parent's, whose mutex may
// have been held at the fork.
std::atomic<sweeper*> current{nullptr};
std::mutex making;

// This process's sweeper, made on first use; nullptr in the rare case that another thread
// is making it (or was, in the parent, at a fork): the caller then tries again later.
sweeper* sweeper_here() {
  auto* s = current.load(std::memory_order_acquire);
  if (s && s->pid() == ::getpid()) return s;
  std::unique_lock lock(making, std::try_to_lock);
  if (!lock.owns_lock()) return nullptr;
  s = current.load(std::memory_order_acquire);
  if (s && s->pid() == ::getpid()) return s;
  s = new sweeper();
  current.store(s, std::memory_order_release);
  return s;
}

}  // namespace

void watch_leases(const std::shared_ptr<lease_table>& table) {
  if (table->watched.exchange(true, std::memory_order_acq_rel)) return;
  if (auto* s = sweeper_here())
    s->watch(table);
  else
    table->watched.store(false, std::memory_order_release);
}

}  // namespace sluice::detail
