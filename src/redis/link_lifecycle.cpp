#include "redis/link_lifecycle.hpp"

#include <algorithm>

namespace sluice::redis {

std::chrono::milliseconds backoff_delay(unsigned attempt, std::chrono::milliseconds min,
                                        std::chrono::milliseconds max) noexcept {
  if (attempt == 0) return std::chrono::milliseconds{0};
  auto d = std::max(min, std::chrono::milliseconds{1});
  for (unsigned i = 1; i < attempt && d < max; ++i) d *= 2;
  return std::min(d, max);
}

void link_lifecycle::connected() noexcept {
  if (state() == link_state::stopped) return;
  next_attempt_ = 0;
  failed_ = 0;
  set(link_state::up);
}

std::optional<link_lifecycle::failure> link_lifecycle::attempt_failed() {
  ++failed_;
  return fail(std::max(next_attempt_, 1u));
}

std::optional<link_lifecycle::failure> link_lifecycle::lost() { return fail(next_attempt_); }

bool link_lifecycle::retarget() noexcept {
  if (state() == link_state::stopped) return false;
  next_attempt_ = 0;
  failed_ = 0;
  set(link_state::connecting);
  return true;
}

std::optional<link_lifecycle::failure> link_lifecycle::fail(unsigned attempt) {
  const link_state before = state();
  if (before == link_state::stopped) return std::nullopt;
  set(link_state::down);
  next_attempt_ = attempt + 1;
  auto delay = backoff_delay(attempt, backoff_min_, backoff_max_);
  if (delay.count() > 1) {
    // Jitter in [delay/2, delay]: clients that lost one server do not return in lockstep.
    std::uniform_int_distribution<long> dist(delay.count() / 2, delay.count());
    delay = std::chrono::milliseconds{dist(jitter_)};
  }
  return failure{.first = before != link_state::down, .retry_in = delay};
}

}  // namespace sluice::redis
