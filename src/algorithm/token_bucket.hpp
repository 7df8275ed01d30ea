#pragma once
// The token bucket as a pure step: (state, now, params) -> (outcome, new state).
// It never reads a clock. lua/prelude.lua is the same math, line for line, so Redis
// and memory give the same decision for the same history (tests/integration checks it).
//
// Units keep everything integer and exact: time in milliseconds, tokens in micro-tokens
// (1 token = 1'000'000 ut), the refill rate in micro-tokens per millisecond, which equals
// milli-tokens per second. Largest values: capacity 1e9 tokens = 1e15 ut < 2^53, so Lua's
// doubles hold every quantity exactly too.
#include <cstddef>
#include <cstdint>
#include <optional>

#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice::detail {

inline constexpr std::int64_t micro_tokens_per_token = 1'000'000;

struct token_bucket_params {
  std::int64_t capacity_ut = 0;
  std::int64_t rate_ut_per_ms = 0;
  std::int64_t cost_ut = 0;
};

/// Converts a validated policy and cost into integer units.
token_bucket_params to_params(const policy& p, std::uint64_t cost) noexcept;

/// A stored bucket. No state means a full bucket.
struct token_bucket_state {
  std::int64_t level_ut = 0;  ///< tokens in the bucket at ts_ms
  std::int64_t ts_ms = 0;     ///< when level_ut was last brought up to date
};

struct token_bucket_outcome {
  bool allowed = false;
  /// The state to store; only when `allowed` (a denial changes nothing that matters:
  /// refill is linear, so the old state yields the same level later).
  token_bucket_state next;
  std::int64_t remaining_ut = 0;
  std::int64_t retry_after_ms = 0;  ///< 0 when allowed
  std::int64_t reset_after_ms = 0;  ///< until full; also the stored key's time to live
};

/// The bucket brought up to `now_ms`: capped at the capacity and refilled (a missing one
/// is full). A clock that went backwards refills nothing.
token_bucket_state token_bucket_refill(const token_bucket_params& p,
                                       std::optional<token_bucket_state> prev,
                                       std::int64_t now_ms) noexcept;

token_bucket_outcome token_bucket_decide(const token_bucket_params& p,
                                         std::optional<token_bucket_state> prev,
                                         std::int64_t now_ms) noexcept;

/// The public decision for an outcome.
decision to_decision(const token_bucket_outcome& o, std::uint64_t capacity) noexcept;

/// ceil(a / b) for a >= 0, b > 0.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b + (a % b != 0 ? 1 : 0);
}

}  // namespace sluice::detail
