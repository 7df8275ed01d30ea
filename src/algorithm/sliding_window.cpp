// Sliding window (log): at most `limit` in any window of length W, exactly. The state is
// the log of admitted requests in the last W (one entry per distinct millisecond, oldest
// first), so it holds at most `limit` entries (max_sliding_window_limit bounds it).
// A request at `now` counts until now + W. lua/prelude.lua (sluice_sliding_window) is the
// same math.
#include <algorithm>

#include "algorithm/algorithms.hpp"

namespace sluice::detail {
namespace {

// The entries still inside the window ending now: those after now - W.
std::size_t first_live(const limit_params& p, const std::vector<log_entry>& log,
                       std::int64_t now_ms) noexcept {
  std::size_t i = 0;
  while (i < log.size() && log[i].ts_ms <= now_ms - p.b) ++i;
  return i;
}

std::int64_t total_from(const std::vector<log_entry>& log, std::size_t i) noexcept {
  std::int64_t t = 0;
  for (; i < log.size(); ++i) t += log[i].n;
  return t;
}

const std::vector<log_entry> no_log;

}  // namespace

limit_outcome sliding_window_decide(const limit_params& p, std::optional<limit_state>& s,
                                    std::int64_t now_ms) {
  return sliding_window_lease(p, s, now_ms, now_ms);
}

limit_outcome sliding_window_lease(const limit_params& p, std::optional<limit_state>& s,
                                   std::int64_t now_ms, std::int64_t stamp_ms) {
  const auto& log = s ? s->log : no_log;
  const std::size_t first = first_live(p, log, now_ms);
  const std::int64_t total = total_from(log, first);
  limit_outcome o;
  if (total + p.cost <= p.a) {
    limit_state next;
    next.log.assign(log.begin() + static_cast<std::ptrdiff_t>(first), log.end());
    // A clock that went back still appends in order (at the newest time seen).
    const std::int64_t ts = next.log.empty() ? stamp_ms : std::max(stamp_ms, next.log.back().ts_ms);
    if (!next.log.empty() && next.log.back().ts_ms == ts) {
      next.log.back().n += p.cost;
    } else {
      next.log.push_back({ts, p.cost});
    }
    o.allowed = true;
    o.remaining = p.a - total - p.cost;
    o.reset_after_ms = ts + p.b - now_ms;
    s = std::move(next);
    return o;
  }
  // Denied: wait until enough of the oldest entries leave the window.
  const std::int64_t need = total + p.cost - p.a;
  std::int64_t freed = 0;
  for (std::size_t i = first; i < log.size(); ++i) {
    freed += log[i].n;
    if (freed >= need) {
      o.retry_after_ms = log[i].ts_ms + p.b - now_ms;
      break;
    }
  }
  // A limit lowered since the log was written can be below its total: nothing remains.
  o.remaining = std::max<std::int64_t>(0, p.a - total);
  o.reset_after_ms = log.back().ts_ms + p.b - now_ms;
  return o;
}

limit_status sliding_window_status(const limit_params& p, const std::optional<limit_state>& s,
                                   std::int64_t now_ms) {
  const auto& log = s ? s->log : no_log;
  const std::size_t first = first_live(p, log, now_ms);
  if (first == log.size()) return {p.a, 0};
  return {std::max<std::int64_t>(0, p.a - total_from(log, first)), log.back().ts_ms + p.b - now_ms};
}

void sliding_window_adjust(const limit_params& p, std::optional<limit_state>& s,
                           std::int64_t now_ms, bool refund) {
  const auto& log = s ? s->log : no_log;
  limit_state next;
  next.log.assign(log.begin() + static_cast<std::ptrdiff_t>(first_live(p, log, now_ms)), log.end());
  auto& live = next.log;
  if (refund) {
    // The newest entries are the ones the spending wrote.
    std::int64_t back = p.cost;
    while (back > 0 && !live.empty()) {
      const std::int64_t take = std::min(back, live.back().n);
      live.back().n -= take;
      back -= take;
      if (live.back().n == 0) live.pop_back();
    }
  } else {
    const std::int64_t add = std::min(p.cost, 2 * p.a - total_from(live, 0));
    if (add > 0) {
      const std::int64_t ts = live.empty() ? now_ms : std::max(now_ms, live.back().ts_ms);
      if (!live.empty() && live.back().ts_ms == ts) {
        live.back().n += add;
      } else {
        live.push_back({ts, add});
      }
    }
  }
  s = std::move(next);
}

}  // namespace sluice::detail
