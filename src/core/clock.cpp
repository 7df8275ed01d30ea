#include <sluice/clock.hpp>

namespace sluice {

namespace {

using std::chrono::microseconds;

microseconds since_epoch(auto t) noexcept {
  return std::chrono::duration_cast<microseconds>(t.time_since_epoch());
}

// Unix time minus steady time, read once per process: steady time plus it reads as Unix
// time (as of the first use) and still never goes backwards.
microseconds unix_offset() noexcept {
  static const microseconds offset =
      since_epoch(std::chrono::system_clock::now()) - since_epoch(std::chrono::steady_clock::now());
  return offset;
}

}  // namespace

std::chrono::microseconds steady_clock::now() const noexcept {
  return since_epoch(std::chrono::steady_clock::now()) + unix_offset();
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
