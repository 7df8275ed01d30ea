#include "core/burst_log.hpp"

#include "core/log.hpp"

namespace sluice::detail {

burst_log::burst_log(std::string what, std::chrono::seconds repeat_every)
    : what_(std::move(what)), repeat_every_(repeat_every) {}

std::int64_t burst_log::now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void burst_log::failure(std::error_code ec) noexcept {
  constexpr auto relaxed = std::memory_order_relaxed;
  if (failing_.load(std::memory_order_acquire) && now_ns() < next_report_ns_.load(relaxed)) {
    suppressed_.fetch_add(1, relaxed);
    total_.fetch_add(1, relaxed);
    return;
  }
  std::lock_guard lock(mu_);
  const auto now = now_ns();
  const auto repeat = std::chrono::duration_cast<std::chrono::nanoseconds>(repeat_every_).count();
  if (!failing_.load(relaxed)) {
    suppressed_.store(0, relaxed);
    total_.store(1, relaxed);
    next_report_ns_.store(now + repeat, relaxed);
    failing_.store(true, std::memory_order_release);
    sluice::detail::logf(sluice::log_level::warn,
                         "{}: {}; checks apply their failure mode, key operations return the error "
                         "(further errors are counted, not logged)",
                         what_, ec.message());
  } else if (now >= next_report_ns_.load(relaxed)) {
    total_.fetch_add(1, relaxed);
    sluice::detail::logf(sluice::log_level::warn,
                         "{}: still failing ({}), {} errors since the last report", what_,
                         ec.message(), suppressed_.exchange(0, relaxed) + 1);
    next_report_ns_.store(now + repeat, relaxed);
  } else {
    suppressed_.fetch_add(1, relaxed);
    total_.fetch_add(1, relaxed);
  }
}

void burst_log::recovered() noexcept {
  std::lock_guard lock(mu_);
  if (!failing_.load(std::memory_order_relaxed)) return;
  failing_.store(false, std::memory_order_relaxed);
  sluice::detail::logf(sluice::log_level::info, "{}: answering again after {} failed decisions",
                       what_, total_.load(std::memory_order_relaxed));
}

}  // namespace sluice::detail
