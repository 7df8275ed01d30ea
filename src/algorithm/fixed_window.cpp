// Fixed window: at most `limit` per window aligned to the Unix epoch (now - now % window),
// the quota form. State: the count and the window it belongs to; a count of an earlier
// window is no count. lua/prelude.lua (sluice_fixed_window) is the same math.
#include <algorithm>

#include "algorithm/algorithms.hpp"

namespace sluice::detail {
namespace {

struct window_count {
  std::int64_t start = 0;
  std::int64_t count = 0;
};

// The current window and its count. A stored window later than now's (the clock went
// back) stays the current one, so a step back never forgets what was counted.
window_count current(const limit_params& p, const std::optional<limit_state>& s,
                     std::int64_t now_ms) noexcept {
  window_count w{floor_div(now_ms, p.b) * p.b, 0};
  if (s && s->y >= w.start) w = {s->y, s->x};
  return w;
}

}  // namespace

limit_outcome fixed_window_decide(const limit_params& p, std::optional<limit_state>& s,
                                  std::int64_t now_ms) {
  const window_count w = current(p, s, now_ms);
  const std::int64_t end = w.start + p.b - now_ms;
  limit_outcome o;
  if (w.count + p.cost <= p.a) {
    o.allowed = true;
    s = scalar_state(w.count + p.cost, w.start);
    o.remaining = p.a - s->x;
    o.reset_after_ms = end;
    return o;
  }
  o.retry_after_ms = end;
  // A limit lowered since the count was made can be below it: nothing remains.
  o.remaining = std::max<std::int64_t>(0, p.a - w.count);
  o.reset_after_ms = w.count > 0 ? end : 0;
  return o;
}

limit_status fixed_window_status(const limit_params& p, const std::optional<limit_state>& s,
                                 std::int64_t now_ms) {
  const window_count w = current(p, s, now_ms);
  return {std::max<std::int64_t>(0, p.a - w.count), w.count > 0 ? w.start + p.b - now_ms : 0};
}

void fixed_window_adjust(const limit_params& p, std::optional<limit_state>& s,
                         std::int64_t now_ms, bool refund) {
  const window_count w = current(p, s, now_ms);
  const std::int64_t count = refund ? std::max<std::int64_t>(0, w.count - p.cost)
                                    : std::min(2 * p.a, w.count + p.cost);
  s = scalar_state(count, w.start);
}

}  // namespace sluice::detail
