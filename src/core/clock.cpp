#include <sluice/clock.hpp>

namespace sluice {

std::chrono::microseconds steady_clock::now() const noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now().time_since_epoch());
}

manual_clock::manual_clock(std::chrono::microseconds start) : now_us_(start.count()) {}

std::chrono::microseconds manual_clock::now() const noexcept {
  return std::chrono::microseconds{now_us_.load(std::memory_order_acquire)};
}

void manual_clock::set(std::chrono::microseconds t) noexcept {
  now_us_.store(t.count(), std::memory_order_release);
}

void manual_clock::advance(std::chrono::microseconds d) noexcept {
  now_us_.fetch_add(d.count(), std::memory_order_acq_rel);
}

std::shared_ptr<const clock> default_clock() {
  static const auto instance = std::make_shared<const steady_clock>();
  return instance;
}

}  // namespace sluice
