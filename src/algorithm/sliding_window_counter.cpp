// Sliding window counter (Cloudflare's): two epoch-aligned fixed windows, the previous one
// weighted by how much of it a window ending now still covers. With L the limit, W the
// window, e the time into the current window, a request of cost c is allowed iff
//     prev x (W - e) + (cur + c) x W <= L x W,
// all in integers (L x W <= 4e15 keeps every term below 2^53 for Lua's doubles). It never
// admits more than L in one aligned window, and fewer than 2L in any window of length W.
// lua/prelude.lua (sluice_sliding_window_counter) is the same math.
#include <algorithm>

#include "algorithm/algorithms.hpp"
#include "algorithm/token_bucket.hpp"

namespace sluice::detail {
namespace {

struct counts {
  std::int64_t start = 0;  // the current window's start
  std::int64_t cur = 0;
  std::int64_t prev = 0;
  std::int64_t e = 0;  // ms into the current window
};

// The windows as of now. A stored window later than now's (the clock went back) stays
// the current one, with e = 0.
counts current(const limit_params& p, const std::optional<limit_state>& s,
               std::int64_t now_ms) noexcept {
  const std::int64_t w = p.b;
  counts c{floor_div(now_ms, w) * w, 0, 0, 0};
  if (s) {
    if (s->x >= c.start) {
      c = {s->x, s->y, s->z, 0};
    } else if (s->x == c.start - w) {
      c.prev = s->y;
    }
  }
  c.e = std::max<std::int64_t>(0, now_ms - c.start);
  return c;
}

// Whole units left: L - cur - the previous window's weighted count, rounded up.
std::int64_t left(const limit_params& p, const counts& c) noexcept {
  const std::int64_t w = p.b;
  return std::max<std::int64_t>(0, p.a - c.cur - ceil_div(c.prev * (w - c.e), w));
}

// Until neither window counts: the current one's count weighs until start + 2W.
std::int64_t until_empty(const limit_params& p, const counts& c, std::int64_t now_ms) noexcept {
  if (c.cur > 0) return c.start + 2 * p.b - now_ms;
  if (c.prev > 0) return c.start + p.b - now_ms;
  return 0;
}

}  // namespace

limit_outcome sliding_window_counter_decide(const limit_params& p, std::optional<limit_state>& s,
                                            std::int64_t now_ms) {
  const std::int64_t l = p.a, w = p.b, cost = p.cost;
  counts c = current(p, s, now_ms);
  limit_outcome o;
  if (c.prev * (w - c.e) + (c.cur + cost) * w <= l * w) {
    o.allowed = true;
    c.cur += cost;
    s = scalar_state(c.start, c.cur, c.prev);
    o.remaining = left(p, c);
    o.reset_after_ms = until_empty(p, c, now_ms);
    return o;
  }
  if (c.cur + cost <= l) {
    // Later in this window, once the previous window's weight has fallen enough (a denial
    // here means prev > 0).
    const std::int64_t at = w - (l - c.cur - cost) * w / c.prev;
    o.retry_after_ms = c.start + at - now_ms;
  } else {
    // In the next window, where this window's count is the weighted one (cost <= L).
    const std::int64_t at = w - (l - cost) * w / c.cur;
    o.retry_after_ms = c.start + w + at - now_ms;
  }
  o.remaining = left(p, c);
  o.reset_after_ms = until_empty(p, c, now_ms);
  return o;
}

limit_status sliding_window_counter_status(const limit_params& p,
                                           const std::optional<limit_state>& s,
                                           std::int64_t now_ms) {
  const counts c = current(p, s, now_ms);
  return {left(p, c), until_empty(p, c, now_ms)};
}

void sliding_window_counter_adjust(const limit_params& p, std::optional<limit_state>& s,
                                   std::int64_t now_ms, bool refund) {
  counts c = current(p, s, now_ms);
  c.cur = refund ? std::max<std::int64_t>(0, c.cur - p.cost) : std::min(2 * p.a, c.cur + p.cost);
  s = scalar_state(c.start, c.cur, c.prev);
}

}  // namespace sluice::detail
