#pragma once
/// Time sources for in-process decisions. Redis decisions use the Redis server's clock.
#include <atomic>
#include <chrono>
#include <memory>

namespace sluice {

/// A source of time in microseconds on the clock's own epoch. Thread-safe.
class clock {
 public:
  virtual ~clock() = default;
  virtual std::chrono::microseconds now() const noexcept = 0;
};

/// std::chrono::steady_clock moved to the Unix epoch: it never goes backwards, and windows
/// aligned to the epoch (fixed_window: a 1 d window ends at midnight UTC) start where they
/// start on Redis, whose clock is Unix time. The offset is taken once per process, so a
/// later change of the system clock moves nothing.
class steady_clock final : public clock {
 public:
  std::chrono::microseconds now() const noexcept override;
};

/// A clock that moves only when told to: for tests and simulations. Thread-safe.
class manual_clock final : public clock {
 public:
  explicit manual_clock(std::chrono::microseconds start = std::chrono::seconds{1'000'000});
  std::chrono::microseconds now() const noexcept override;
  void set(std::chrono::microseconds t) noexcept;
  void advance(std::chrono::microseconds d) noexcept;

 private:
  std::atomic<std::int64_t> now_us_;
};

/// A shared steady_clock.
std::shared_ptr<const clock> default_clock();

}  // namespace sluice
