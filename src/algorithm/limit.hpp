#pragma once
// Every algorithm as a pure step: (params, stored state, now) -> (outcome, state to store).
// Nothing here reads a clock or does I/O. The memory backend runs these functions; the Lua
// prelude (lua/prelude.lua) is the same math line for line, so Redis and memory give the
// same decision for the same history (tests/integration/algorithm_replay_test.cpp).
//
// Units keep everything integer and exact, and below 2^53 so Lua's doubles hold them too:
// - token_bucket: micro-tokens and milliseconds (see token_bucket.hpp);
// - gcra: microseconds; a token is worth T = round(1e6 / rate) us;
// - windows: whole requests (cost units) and milliseconds.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <sluice/backend.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

namespace sluice::detail {

/// A validated policy and cost in integer units; `a` and `b` mean, per algorithm:
/// token_bucket: capacity_ut, rate_ut_per_ms; gcra: T_us (time per token), B_us (capacity x
/// T: the burst as time); windows: limit, window_ms. `cost` is in the same units (tb:
/// micro-tokens; gcra: cost x T; windows: requests).
/// What a step does: a check, or one of the key operations (the same numbers as
/// sluice::key_operation, and on the wire, where a script gets algorithm + 8 x op).
enum class limit_op : std::uint8_t { check = 0, peek, reset, refund, penalize, block };

struct limit_params {
  sluice::algorithm algo = sluice::algorithm::token_bucket;
  std::int64_t a = 0;
  std::int64_t b = 0;
  /// check and peek: the cost; refund and penalize: the amount, in the same units; block:
  /// its length in ms; reset: 0.
  std::int64_t cost = 0;
  limit_op op = limit_op::check;
  friend bool operator==(const limit_params&, const limit_params&) = default;
};

limit_params to_limit_params(const policy& p, std::uint64_t cost) noexcept;
/// The parameters of a key operation on a validated policy (`amount` as backend::operate).
limit_params to_limit_params(const policy& p, key_operation op, std::uint64_t amount) noexcept;

/// The number a script gets for the algorithm and the step: algorithm + 8 x op.
constexpr std::int64_t wire_code(const limit_params& p) noexcept {
  return static_cast<std::int64_t>(p.algo) + 8 * static_cast<std::int64_t>(p.op);
}

/// gcra's time per token T in whole microseconds: the rate is first rounded to 0.001/s as
/// token_bucket's is, then T to the nearest microsecond (so rates above ~1000/s run up to
/// rate / 2e6 off; docs/ALGORITHMS.md). At least 1 for rates up to max_gcra_refill_per_second.
std::int64_t gcra_time_per_token_us(double refill_per_second) noexcept;

/// One sliding_window log entry: `n` requests admitted at `ts_ms`.
struct log_entry {
  std::int64_t ts_ms = 0;
  std::int64_t n = 0;
  friend bool operator==(const log_entry&, const log_entry&) = default;
};

/// A stored state. Per algorithm: token_bucket {x level_ut, y ts_ms}; gcra {x tat_us};
/// fixed_window {x count, y window start ms}; sliding_window_counter {x window start ms,
/// y current count, z previous window's count}; sliding_window {log, oldest first}.
/// No state means nothing was admitted within the state's lifetime (a full bucket).
struct limit_state {
  std::int64_t x = 0;
  std::int64_t y = 0;
  std::int64_t z = 0;
  std::vector<log_entry> log;
  /// A block (key_operation::block) until then, in us; 0: none. While it lasts the key is
  /// denied and nothing else is kept; after it the key starts afresh.
  std::int64_t blocked_until_us = 0;
  friend bool operator==(const limit_state&, const limit_state&) = default;
};

/// A state of numbers only (every algorithm but sliding_window).
inline limit_state scalar_state(std::int64_t x, std::int64_t y = 0, std::int64_t z = 0) {
  limit_state s;
  s.x = x;
  s.y = y;
  s.z = z;
  return s;
}

/// The longest wait (retry_after_ms, reset_after_ms) a decision may report: the largest
/// bucket (max_capacity) refilling at the lowest rate (0.001/s: 1e6 ms a token) from one
/// burst below empty (a penalized bucket owes at most one burst), 2e15 ms. GCRA's bursts,
/// the windows and a block (max_window) are shorter. A backend's reply beyond it is not a
/// decision (Redis holds what any client wrote there).
inline constexpr std::int64_t longest_wait_ms =
    2 * static_cast<std::int64_t>(max_capacity) * 1'000'000;

struct limit_outcome {
  bool allowed = false;
  std::int64_t remaining = 0;       ///< whole units left after this decision
  std::int64_t retry_after_ms = 0;  ///< 0 when allowed
  /// Until nothing admitted counts any more (a bucket is full, a window is empty). Also
  /// how long the state must be kept: after that it decides exactly as no state.
  std::int64_t reset_after_ms = 0;
};

/// Decides one request. When allowed, `state` becomes what to store (for reset_after_ms);
/// when denied it is left as it was (a denial spends nothing).
limit_outcome limit_decide(const limit_params& p, std::optional<limit_state>& state,
                           std::int64_t now_us);

/// What a request of p.cost would see now, spending nothing: remaining and reset_after_ms
/// as the state is; allowed and retry_after_ms as limit_decide would answer.
limit_outcome limit_peek(const limit_params& p, const std::optional<limit_state>& state,
                         std::int64_t now_us);

/// The result of limit_apply: the outcome to report, and what to store.
struct limit_applied {
  limit_outcome outcome;
  bool write = false;       ///< store `state` (or delete the key when it is empty)
  std::int64_t ttl_ms = 0;  ///< the stored state's lifetime when written
};

/// Any step, p.op saying which. A check is limit_decide (written when allowed); a peek is
/// limit_peek (never written); the key operations always write: `state` becomes what to
/// store (empty: delete the key), and the outcome is what a check of one unit sees after
/// (peek's), or the block's denial.
limit_applied limit_apply(const limit_params& p, std::optional<limit_state>& state,
                          std::int64_t now_us);

/// What a failure mode decides without a backend: `allow` (open) as if the key had no
/// state; otherwise (closed) as if it were used up: a bucket empty, a window full for one
/// whole window.
limit_outcome limit_assumed(const limit_params& p, bool allow) noexcept;

/// One item of a multi-key decision: its parameters and which state (an index into the
/// state list; items on the same key share one) it spends from.
struct limit_item {
  limit_params params;
  std::size_t state = 0;
};

struct limit_multi_outcome {
  bool allowed = false;              ///< every item allowed: store `next` (then only)
  std::vector<limit_outcome> items;  ///< one per item, in order
  /// Per state: what to store when `allowed`; empty for a state no item used.
  std::vector<std::optional<limit_state>> next;
  std::vector<std::int64_t> ttl_ms;  ///< per state: its lifetime (its last item's reset)
};

/// All-or-nothing over several keys, mixing algorithms: items are decided in sequence,
/// each on the state its key has after the earlier allowing items. If any denies, nothing
/// is to be stored and every item reports its key as it is (remaining and reset_after_ms
/// from limit_peek; an allowing item keeps retry 0, a denying one the retry computed in
/// sequence). Items on one key share its algorithm (the limiter refuses a call that mixes
/// two on one key: errc::mismatched_parameters).
limit_multi_outcome limit_decide_all(std::span<const limit_item> items,
                                     std::span<const std::optional<limit_state>> prev,
                                     std::int64_t now_us);

/// The public decision for an outcome of a policy whose limit_of() is `limit`; remaining is
/// at most `limit` (a key that another policy, or another client, wrote may hold more).
decision to_decision(const limit_outcome& o, std::uint64_t limit) noexcept;

}  // namespace sluice::detail
