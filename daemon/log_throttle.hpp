#pragma once
// "Logged once per burst": a hostile client can make the same complaint happen thousands of
// times a second (connections over the limit, heads that never finish), and a log line for
// each would be its own denial of service. The first event logs; later ones are counted and
// reported with the next line, at most one line per `every`.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace sluice::daemon {

/// Thread-safe, lock-free.
class log_throttle {
 public:
  explicit log_throttle(std::chrono::seconds every = std::chrono::seconds{10}) noexcept
      : every_ns_(std::chrono::nanoseconds(every).count()) {}

  /// 0 when this event should not be logged; otherwise 1 + the number of events suppressed
  /// since the last one that was.
  std::uint64_t admit() noexcept {
    const auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now().time_since_epoch())
                         .count();
    auto next = next_ns_.load(std::memory_order_relaxed);
    if (now >= next && next_ns_.compare_exchange_strong(next, now + every_ns_)) {
      return suppressed_.exchange(0, std::memory_order_relaxed) + 1;
    }
    suppressed_.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }

 private:
  const std::int64_t every_ns_;
  std::atomic<std::int64_t> next_ns_{0};
  std::atomic<std::uint64_t> suppressed_{0};
};

}  // namespace sluice::daemon
