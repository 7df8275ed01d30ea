#pragma once
// Logs backend trouble once per burst instead of once per request: the first error after
// a healthy spell is logged, the rest are counted, and a summary follows when the backend
// answers again (or every `repeat_every` while it does not).
//
// While a burst lasts, failure() is on the fail-fast path of every check (Redis down, the
// breaker open), so between log lines it only bumps atomics: all callers failing at once
// should not queue on one mutex. The lock only orders the log lines and state changes.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>

namespace sluice::detail {

class burst_log {
 public:
  explicit burst_log(std::string what,
                     std::chrono::seconds repeat_every = std::chrono::seconds{10});
  void failure(std::error_code ec) noexcept;
  void success() noexcept {
    // The hot path: one relaxed load when nothing is wrong.
    if (failing_.load(std::memory_order_relaxed)) recovered();
  }

 private:
  void recovered() noexcept;
  std::string what_;
  std::chrono::seconds repeat_every_;
  static std::int64_t now_ns() noexcept;
  std::atomic<bool> failing_{false};
  std::atomic<std::uint64_t> suppressed_{0};     // since the last log line
  std::atomic<std::uint64_t> total_{0};          // in this burst
  std::atomic<std::int64_t> next_report_ns_{0};  // steady_clock: when to log a summary
  std::mutex mu_;
};

}  // namespace sluice::detail
