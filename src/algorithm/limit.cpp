// limit.hpp's dispatch over the algorithms, and what every algorithm shares: parameters in
// integer units, peek, the all-or-nothing multi-key decision, the public decision.
#include "algorithm/limit.hpp"

#include <algorithm>
#include <cmath>

#include "algorithm/algorithms.hpp"
#include "algorithm/token_bucket.hpp"

namespace sluice::detail {
namespace {

std::int64_t ms_of(std::int64_t now_us) noexcept { return floor_div(now_us, 1000); }

std::optional<token_bucket_state> as_bucket(const std::optional<limit_state>& s) noexcept {
  if (!s) return std::nullopt;
  return token_bucket_state{s->x, s->y};
}

token_bucket_params as_bucket_params(const limit_params& p) noexcept { return {p.a, p.b, p.cost}; }

limit_outcome token_bucket_step(const limit_params& p, std::optional<limit_state>& s,
                                std::int64_t now_ms) {
  const auto o = token_bucket_decide(as_bucket_params(p), as_bucket(s), now_ms);
  if (o.allowed) s = scalar_state(o.next.level_ut, o.next.ts_ms);
  // A penalized bucket can be below zero: nothing remains.
  return {o.allowed, std::max<std::int64_t>(0, o.remaining_ut) / micro_tokens_per_token,
          o.retry_after_ms, o.reset_after_ms};
}

// A block that still holds: denied until it ends, nothing remaining.
limit_outcome blocked(std::int64_t until_us, std::int64_t now_us) noexcept {
  const std::int64_t left = ceil_div(until_us - now_us, 1000);
  return {false, 0, left, left};
}

// True while `s` is a block at now; a block that is over is no state any more.
bool still_blocked(std::optional<limit_state>& s, std::int64_t now_us) noexcept {
  if (!s || s->blocked_until_us == 0) return false;
  if (now_us < s->blocked_until_us) return true;
  s.reset();
  return false;
}

limit_status status(const limit_params& p, const std::optional<limit_state>& state,
                    std::int64_t now_us) {
  std::optional<limit_state> s = state;
  if (still_blocked(s, now_us)) {
    const auto b = blocked(s->blocked_until_us, now_us);
    return {0, b.reset_after_ms};
  }
  const std::int64_t now_ms = ms_of(now_us);
  switch (p.algo) {
    case algorithm::token_bucket: {
      // Deciding on a copy brings the bucket up to now; remaining and reset do not depend
      // on whether it allowed (a denial reports the level as it is, an allowance after
      // spending, hence the cost added back).
      const auto o = token_bucket_decide(as_bucket_params(p), as_bucket(s), now_ms);
      const std::int64_t level = o.remaining_ut + (o.allowed ? p.cost : 0);
      return {std::max<std::int64_t>(0, level) / micro_tokens_per_token,
              ceil_div(p.a - level, p.b)};
    }
    case algorithm::gcra:
      return gcra_status(p, s, now_us);
    case algorithm::fixed_window:
      return fixed_window_status(p, s, now_ms);
    case algorithm::sliding_window_counter:
      return sliding_window_counter_status(p, s, now_ms);
    case algorithm::sliding_window:
      return sliding_window_status(p, s, now_ms);
  }
  return {};
}

}  // namespace

std::int64_t gcra_time_per_token_us(double refill_per_second) noexcept {
  const double milli_per_second = std::round(refill_per_second * 1000.0);
  return static_cast<std::int64_t>(std::llround(1e9 / milli_per_second));
}

limit_params to_limit_params(const policy& p, std::uint64_t cost) noexcept {
  const auto c = static_cast<std::int64_t>(cost);
  switch (p.algorithm) {
    case algorithm::token_bucket: {
      const auto tb = to_params(p, cost);
      return {p.algorithm, tb.capacity_ut, tb.rate_ut_per_ms, tb.cost_ut};
    }
    case algorithm::gcra: {
      const auto t = gcra_time_per_token_us(p.refill_per_second);
      return {p.algorithm, t, static_cast<std::int64_t>(p.capacity) * t, c * t};
    }
    case algorithm::fixed_window:
    case algorithm::sliding_window_counter:
    case algorithm::sliding_window:
      return {p.algorithm, static_cast<std::int64_t>(p.limit), p.window.count(), c};
  }
  return {};
}

limit_outcome limit_decide(const limit_params& p, std::optional<limit_state>& state,
                           std::int64_t now_us) {
  if (still_blocked(state, now_us)) return blocked(state->blocked_until_us, now_us);
  switch (p.algo) {
    case algorithm::token_bucket:
      return token_bucket_step(p, state, ms_of(now_us));
    case algorithm::gcra:
      return gcra_decide(p, state, now_us);
    case algorithm::fixed_window:
      return fixed_window_decide(p, state, ms_of(now_us));
    case algorithm::sliding_window_counter:
      return sliding_window_counter_decide(p, state, ms_of(now_us));
    case algorithm::sliding_window:
      return sliding_window_decide(p, state, ms_of(now_us));
  }
  return {};
}

limit_outcome limit_peek(const limit_params& p, const std::optional<limit_state>& state,
                         std::int64_t now_us) {
  std::optional<limit_state> scratch = state;
  if (still_blocked(scratch, now_us)) return blocked(scratch->blocked_until_us, now_us);
  limit_outcome o = limit_decide(p, scratch, now_us);
  const auto st = status(p, state, now_us);
  o.remaining = st.remaining;
  o.reset_after_ms = st.reset_after_ms;
  return o;
}

limit_params to_limit_params(const policy& p, key_operation op, std::uint64_t amount) noexcept {
  limit_params lp = to_limit_params(
      p, op == key_operation::peek || op == key_operation::refund || op == key_operation::penalize
             ? amount
             : 1);
  lp.op = static_cast<limit_op>(op);
  if (op == key_operation::block) lp.cost = static_cast<std::int64_t>(amount);
  if (op == key_operation::reset) lp.cost = 0;
  return lp;
}

limit_applied limit_apply(const limit_params& p, std::optional<limit_state>& state,
                          std::int64_t now_us) {
  limit_applied r;
  switch (p.op) {
    case limit_op::check:
      r.outcome = limit_decide(p, state, now_us);
      r.write = r.outcome.allowed;
      r.ttl_ms = r.outcome.reset_after_ms;
      return r;
    case limit_op::peek:
      r.outcome = limit_peek(p, state, now_us);
      return r;
    case limit_op::block:
      state = limit_state{};
      state->blocked_until_us = now_us + p.cost * 1000;
      r.outcome = blocked(state->blocked_until_us, now_us);
      r.write = true;
      r.ttl_ms = p.cost;
      return r;
    case limit_op::reset:
      state.reset();
      break;
    case limit_op::refund:
    case limit_op::penalize: {
      // A block is not something to refund or add to: it stays as it is.
      if (still_blocked(state, now_us)) {
        r.outcome = blocked(state->blocked_until_us, now_us);
        return r;
      }
      const bool refund = p.op == limit_op::refund;
      const std::int64_t now_ms = ms_of(now_us);
      switch (p.algo) {
        case algorithm::token_bucket: {
          const auto tb = as_bucket_params(p);
          auto s = token_bucket_refill(tb, as_bucket(state), now_ms);
          s.level_ut =
              refund ? std::min(p.a, s.level_ut + p.cost) : std::max(-p.a, s.level_ut - p.cost);
          state = scalar_state(s.level_ut, s.ts_ms);
          break;
        }
        case algorithm::gcra:
          gcra_adjust(p, state, now_us, refund);
          break;
        case algorithm::fixed_window:
          fixed_window_adjust(p, state, now_ms, refund);
          break;
        case algorithm::sliding_window_counter:
          sliding_window_counter_adjust(p, state, now_ms, refund);
          break;
        case algorithm::sliding_window:
          sliding_window_adjust(p, state, now_ms, refund);
          break;
      }
      break;
    }
  }
  // What a check of one unit sees now; a state that no longer matters is not kept.
  limit_params unit = p;
  unit.op = limit_op::check;
  unit.cost = unit_of(p);
  r.outcome = limit_peek(unit, state, now_us);
  r.write = true;
  r.ttl_ms = r.outcome.reset_after_ms;
  if (r.ttl_ms == 0) state.reset();
  return r;
}

limit_outcome limit_assumed(const limit_params& p, bool allow) noexcept {
  if (allow) {
    // A fresh key at time 0 (a window aligned there): every algorithm's first decision.
    std::optional<limit_state> none;
    return limit_decide(p, none, 0);
  }
  switch (p.algo) {
    case algorithm::token_bucket:
      return {false, 0, ceil_div(p.cost, p.b), ceil_div(p.a, p.b)};
    case algorithm::gcra:
      return {false, 0, ceil_div(p.cost, 1000), ceil_div(p.b, 1000)};
    case algorithm::fixed_window:
    case algorithm::sliding_window_counter:
    case algorithm::sliding_window:
      return {false, 0, p.b, p.b};
  }
  return {};
}

limit_multi_outcome limit_decide_all(std::span<const limit_item> items,
                                     std::span<const std::optional<limit_state>> prev,
                                     std::int64_t now_us) {
  limit_multi_outcome m;
  m.items.reserve(items.size());
  std::vector<std::optional<limit_state>> work(prev.begin(), prev.end());
  std::vector<bool> used(prev.size(), false);
  m.ttl_ms.assign(prev.size(), 0);
  bool all = true;
  for (const auto& it : items) {
    const auto o = limit_decide(it.params, work[it.state], now_us);
    if (o.allowed) {
      used[it.state] = true;
      m.ttl_ms[it.state] = o.reset_after_ms;
    } else {
      all = false;
    }
    m.items.push_back(o);
  }
  m.allowed = all;
  if (all) {
    m.next.resize(prev.size());
    for (std::size_t b = 0; b < prev.size(); ++b) {
      if (used[b]) m.next[b] = std::move(work[b]);
    }
    return m;
  }
  // Nothing is spent: report every key as it is.
  for (std::size_t i = 0; i < items.size(); ++i) {
    const auto st = status(items[i].params, prev[items[i].state], now_us);
    m.items[i].remaining = st.remaining;
    m.items[i].reset_after_ms = st.reset_after_ms;
  }
  m.ttl_ms.assign(prev.size(), 0);
  return m;
}

decision to_decision(const limit_outcome& o, std::uint64_t limit) noexcept {
  decision d;
  d.allowed = o.allowed;
  d.limit = limit;
  d.remaining = std::min(static_cast<std::uint64_t>(o.remaining), limit);
  d.retry_after = std::chrono::milliseconds{o.retry_after_ms};
  d.reset_after = std::chrono::milliseconds{o.reset_after_ms};
  return d;
}

}  // namespace sluice::detail
