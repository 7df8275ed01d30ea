#include "algorithm/token_bucket.hpp"

#include <algorithm>
#include <cmath>

namespace sluice::detail {

token_bucket_params to_params(const policy& p, std::uint64_t cost) noexcept {
  return {
      .capacity_ut = static_cast<std::int64_t>(p.capacity) * micro_tokens_per_token,
      .rate_ut_per_ms = static_cast<std::int64_t>(std::llround(p.refill_per_second * 1000.0)),
      .cost_ut = static_cast<std::int64_t>(cost) * micro_tokens_per_token,
  };
}

token_bucket_state token_bucket_refill(const token_bucket_params& p, std::optional<token_bucket_state> prev,
                          std::int64_t now_ms) noexcept {
  token_bucket_state s = prev.value_or(token_bucket_state{p.capacity_ut, now_ms});
  // A capacity lowered since the state was written caps the level at once.
  s.level_ut = std::min(s.level_ut, p.capacity_ut);
  if (now_ms > s.ts_ms) {
    // Refill, written so the product cannot overflow: past the time to fill, it is full.
    const std::int64_t elapsed = now_ms - s.ts_ms;
    const std::int64_t missing = p.capacity_ut - s.level_ut;
    s.level_ut = elapsed > missing / p.rate_ut_per_ms ? p.capacity_ut
                                                       : std::min(p.capacity_ut, s.level_ut + elapsed * p.rate_ut_per_ms);
    s.ts_ms = now_ms;
  }
  // A clock that went backwards (now < ts) refills nothing and keeps ts.
  return s;
}

token_bucket_outcome token_bucket_decide(const token_bucket_params& p,
                                         std::optional<token_bucket_state> prev,
                                         std::int64_t now_ms) noexcept {
  token_bucket_state s = token_bucket_refill(p, prev, now_ms);
  token_bucket_outcome o;
  if (s.level_ut >= p.cost_ut) {
    o.allowed = true;
    s.level_ut -= p.cost_ut;
    o.next = s;
  } else {
    o.retry_after_ms = ceil_div(p.cost_ut - s.level_ut, p.rate_ut_per_ms);
  }
  o.remaining_ut = s.level_ut;
  o.reset_after_ms = ceil_div(p.capacity_ut - s.level_ut, p.rate_ut_per_ms);
  return o;
}

decision to_decision(const token_bucket_outcome& o, std::uint64_t capacity) noexcept {
  decision d;
  d.allowed = o.allowed;
  d.limit = capacity;
  // A penalized bucket can be below zero: nothing remains.
  d.remaining = static_cast<std::uint64_t>(std::max<std::int64_t>(0, o.remaining_ut) /
                                           micro_tokens_per_token);
  d.retry_after = std::chrono::milliseconds{o.retry_after_ms};
  d.reset_after = std::chrono::milliseconds{o.reset_after_ms};
  return d;
}

}  // namespace sluice::detail
