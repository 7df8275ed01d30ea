// GCRA (the generic cell rate algorithm): a token bucket kept as one number, the
// theoretical arrival time (TAT) of the next request if requests came at exactly the rate.
// A request of cost c moves TAT by c x T and is allowed while the new TAT is at most the
// burst B = capacity x T ahead of now. Same decisions as token_bucket up to T's rounding to
// a whole microsecond; lua/prelude.lua (sluice_gcra) is the same math.
#include <algorithm>

#include "algorithm/algorithms.hpp"
#include "algorithm/token_bucket.hpp"

namespace sluice::detail {
namespace {

// TAT as of now: a past TAT means the bucket is full, which is TAT = now.
std::int64_t tat_now(const std::optional<limit_state>& s, std::int64_t now_us) noexcept {
  return s ? std::max(s->x, now_us) : now_us;
}

// Whole tokens available when TAT is `tat`: the burst not yet used, in units of T.
std::int64_t tokens(const limit_params& p, std::int64_t tat, std::int64_t now_us) noexcept {
  return std::max<std::int64_t>(0, floor_div(now_us + p.b - tat, p.a));
}

}  // namespace

limit_outcome gcra_decide(const limit_params& p, std::optional<limit_state>& s,
                          std::int64_t now_us) {
  const std::int64_t tat = tat_now(s, now_us);
  const std::int64_t next = tat + p.cost;
  const std::int64_t allow_at = next - p.b;
  limit_outcome o;
  if (now_us < allow_at) {
    o.retry_after_ms = ceil_div(allow_at - now_us, 1000);
    o.remaining = tokens(p, tat, now_us);
    o.reset_after_ms = ceil_div(tat - now_us, 1000);
    return o;
  }
  o.allowed = true;
  s = scalar_state(next);
  o.remaining = tokens(p, next, now_us);
  o.reset_after_ms = ceil_div(next - now_us, 1000);
  return o;
}

limit_status gcra_status(const limit_params& p, const std::optional<limit_state>& s,
                         std::int64_t now_us) {
  const std::int64_t tat = tat_now(s, now_us);
  return {tokens(p, tat, now_us), ceil_div(tat - now_us, 1000)};
}

void gcra_adjust(const limit_params& p, std::optional<limit_state>& s, std::int64_t now_us,
                 bool refund) {
  const std::int64_t tat = tat_now(s, now_us);
  s = scalar_state(refund ? std::max(now_us, tat - p.cost)
                          : std::min(tat + p.cost, now_us + 2 * p.b));
}

}  // namespace sluice::detail
