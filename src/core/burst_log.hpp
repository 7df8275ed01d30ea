#pragma once
// Logs backend trouble once per burst instead of once per request: the first error after
// a healthy spell is logged, the rest are counted, and a summary follows when the backend
// answers again (or every `repeat_every` while it does not).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <system_error>

namespace sluice::detail {

class burst_log {
 public:
  explicit burst_log(std::string what, std::chrono::seconds repeat_every = std::chrono::seconds{10});
  void failure(std::error_code ec) noexcept;
  void success() noexcept {
    // The hot path: one relaxed load when nothing is wrong.
    if (failing_.load(std::memory_order_relaxed)) recovered();
  }

 private:
  void recovered() noexcept;
  std::string what_;
  std::chrono::seconds repeat_every_;
  std::atomic<bool> failing_{false};
  std::mutex mu_;
  std::uint64_t suppressed_ = 0;
  std::uint64_t total_ = 0;
  std::chrono::steady_clock::time_point last_log_{};
};

}  // namespace sluice::detail
