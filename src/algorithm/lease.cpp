// lease.hpp's steps, built on limit.hpp's: a grant is a check of the granted units, a
// return is a refund that stays in the window the units came from.
#include "algorithm/lease.hpp"

#include <algorithm>

#include "algorithm/algorithms.hpp"

namespace sluice::detail {
namespace {

// Fixed and sliding-counter windows count per window aligned to the epoch.
bool aligned_windows(algorithm a) noexcept {
  return a == algorithm::fixed_window || a == algorithm::sliding_window_counter;
}

limit_params as_check(const limit_params& p, std::int64_t cost) noexcept {
  limit_params c = p;
  c.op = limit_op::check;
  c.cost = cost;
  return c;
}

}  // namespace

limit_grant limit_lease(const limit_params& p, const lease_ask& ask,
                        std::optional<limit_state>& state, std::int64_t now_us) {
  const std::int64_t unit = unit_of(p);
  const std::int64_t cost_units = std::max<std::int64_t>(1, p.cost / unit);
  const std::int64_t now_ms = floor_div(now_us, 1000);

  // What is there to share now: the whole units a check of one would see.
  const auto seen = limit_peek(as_check(p, unit), state, now_us);
  std::int64_t n = cost_units;
  if (seen.remaining > cost_units) {
    const std::int64_t share = seen.remaining / std::max<std::int64_t>(1, ask.askers);
    n = std::clamp(ask.want, cost_units, std::max(cost_units, share));
  }
  limit_grant g;
  g.valid_ms = ask.ttl_ms;
  if (aligned_windows(p.algo)) {
    const std::int64_t window_end = (floor_div(now_ms, p.b) + 1) * p.b;
    g.valid_ms = std::min(g.valid_ms, window_end - now_ms);
  }
  // A sliding window's lease is logged at the time it ends, not now: every unit of it is
  // spent by then, so it counts for a whole window after any of its spending, and no
  // window of spending holds more than the limit. (The price: it counts valid_ms longer
  // than a check would, a valid_ms / window share of the limit.)
  const std::int64_t stamp_us =
      p.algo == algorithm::sliding_window ? now_us + g.valid_ms * 1000 : 0;
  const auto take = [&](std::int64_t units) {
    if (stamp_us == 0) return limit_decide(as_check(p, units * unit), state, now_us);
    return sliding_window_lease(as_check(p, units), state, now_ms, floor_div(stamp_us, 1000));
  };
  g.outcome = take(n);
  if (!g.outcome.allowed && n > cost_units) {
    // The share did not fit after all (an algorithm whose remaining is an estimate): the
    // request alone, as a check.
    n = cost_units;
    g.outcome = take(n);
  }
  if (!g.outcome.allowed) return g;
  g.granted = n;
  g.ttl_ms = g.outcome.reset_after_ms;
  g.at_ms = stamp_us != 0 ? state->log.back().ts_ms : now_ms;
  return g;
}

limit_applied limit_lease_return(const limit_params& p, std::int64_t units,
                                 std::int64_t granted_at_ms, std::optional<limit_state>& state,
                                 std::int64_t now_us) {
  const std::int64_t unit = unit_of(p);
  const std::int64_t now_ms = floor_div(now_us, 1000);
  const auto as_it_is = [&] {
    limit_applied r;
    r.outcome = limit_peek(as_check(p, unit), state, now_us);
    return r;
  };
  if (units <= 0) return as_it_is();
  if (aligned_windows(p.algo) && floor_div(granted_at_ms, p.b) != floor_div(now_ms, p.b)) {
    return as_it_is();  // that window is over: its units no longer count
  }
  if (p.algo != algorithm::sliding_window) {
    limit_params refund = p;
    refund.op = limit_op::refund;
    refund.cost = units * unit;
    return limit_apply(refund, state, now_us);
  }
  // The log entry the grant wrote, if it is still there: a refund of the newest entries
  // would move the units' time forward and let them count for less time than they should.
  if (!state || state->blocked_until_us != 0) return as_it_is();
  auto& log = state->log;
  const auto it = std::find_if(log.begin(), log.end(), [&](const log_entry& e) {
    return e.ts_ms == granted_at_ms && e.ts_ms > now_ms - p.b;
  });
  if (it == log.end()) return as_it_is();
  it->n -= std::min(units, it->n);
  if (it->n == 0) log.erase(it);
  limit_applied r = as_it_is();
  r.write = true;
  r.ttl_ms = r.outcome.reset_after_ms;
  if (r.ttl_ms == 0) state.reset();
  return r;
}

}  // namespace sluice::detail
