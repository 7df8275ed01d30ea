#include "core/burst_log.hpp"

#include <spdlog/spdlog.h>

namespace sluice::detail {

burst_log::burst_log(std::string what, std::chrono::seconds repeat_every)
    : what_(std::move(what)), repeat_every_(repeat_every) {}

void burst_log::failure(std::error_code ec) noexcept {
  std::lock_guard lock(mu_);
  ++total_;
  const auto now = std::chrono::steady_clock::now();
  if (!failing_.load(std::memory_order_relaxed)) {
    failing_.store(true, std::memory_order_relaxed);
    last_log_ = now;
    suppressed_ = 0;
    total_ = 1;
    spdlog::warn("{}: {}; applying the failure mode (further errors are counted, not logged)",
                 what_, ec.message());
  } else if (now - last_log_ >= repeat_every_) {
    spdlog::warn("{}: still failing ({}), {} errors since the last report", what_, ec.message(),
                 suppressed_ + 1);
    last_log_ = now;
    suppressed_ = 0;
  } else {
    ++suppressed_;
  }
}

void burst_log::recovered() noexcept {
  std::lock_guard lock(mu_);
  if (!failing_.load(std::memory_order_relaxed)) return;
  failing_.store(false, std::memory_order_relaxed);
  spdlog::info("{}: answering again after {} failed decisions", what_, total_);
}

}  // namespace sluice::detail
