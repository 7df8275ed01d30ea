#pragma once
// The per-algorithm steps behind limit.hpp's dispatch. Each `*_decide` has limit_decide's
// contract; each `*_status` says what remaining and reset_after_ms are as the state is.
#include "algorithm/limit.hpp"
#include "algorithm/token_bucket.hpp"

namespace sluice::detail {

struct limit_status {
  std::int64_t remaining = 0;
  std::int64_t reset_after_ms = 0;
};

limit_outcome gcra_decide(const limit_params& p, std::optional<limit_state>& s,
                          std::int64_t now_us);
limit_status gcra_status(const limit_params& p, const std::optional<limit_state>& s,
                         std::int64_t now_us);

limit_outcome fixed_window_decide(const limit_params& p, std::optional<limit_state>& s,
                                  std::int64_t now_ms);
limit_status fixed_window_status(const limit_params& p, const std::optional<limit_state>& s,
                                 std::int64_t now_ms);

limit_outcome sliding_window_counter_decide(const limit_params& p, std::optional<limit_state>& s,
                                            std::int64_t now_ms);
limit_status sliding_window_counter_status(const limit_params& p,
                                           const std::optional<limit_state>& s,
                                           std::int64_t now_ms);

limit_outcome sliding_window_decide(const limit_params& p, std::optional<limit_state>& s,
                                    std::int64_t now_ms);
/// sliding_window_decide, with the admitted entry logged at `stamp_ms` (>= now_ms) instead
/// of now: it then counts until stamp_ms + window (a lease, lease.hpp).
limit_outcome sliding_window_lease(const limit_params& p, std::optional<limit_state>& s,
                                   std::int64_t now_ms, std::int64_t stamp_ms);
limit_status sliding_window_status(const limit_params& p, const std::optional<limit_state>& s,
                                   std::int64_t now_ms);

// Key operations: give back (refund) or spend whatever is left (penalize) p.cost; `s`
// becomes the state after. Penalties are bounded (a bucket owes at most one burst, a count
// reaches at most twice the limit) so every quantity stays below 2^53.
void gcra_adjust(const limit_params& p, std::optional<limit_state>& s, std::int64_t now_us,
                 bool refund);
void fixed_window_adjust(const limit_params& p, std::optional<limit_state>& s, std::int64_t now_ms,
                         bool refund);
void sliding_window_counter_adjust(const limit_params& p, std::optional<limit_state>& s,
                                   std::int64_t now_ms, bool refund);
void sliding_window_adjust(const limit_params& p, std::optional<limit_state>& s,
                           std::int64_t now_ms, bool refund);

/// One unit of what the policy counts (a token, a request), in its parameters' units.
constexpr std::int64_t unit_of(const limit_params& p) noexcept {
  switch (p.algo) {
    case algorithm::token_bucket:
      return micro_tokens_per_token;
    case algorithm::gcra:
      return p.a;
    default:
      return 1;
  }
}

/// floor(a / b) for b > 0 and any a (C++ division truncates towards zero).
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept {
  return a / b - (a % b != 0 && a < 0 ? 1 : 0);
}

}  // namespace sluice::detail
