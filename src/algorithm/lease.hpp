#pragma once
// Quota leases as pure steps: the server side of issue 33's leasing, on a key's stored state.
//
// A lease hands one instance up to `want` units of a limit in one atomic step, debited from
// the key's state exactly as a check of that many units would be; the instance then decides
// locally from them until they run out or the lease ends, and gives back what it did not
// spend. Every unit is debited at the server's time t and spent before t + valid_ms, so the
// admitted count in any window is what the algorithm allows over that window stretched by
// the lease's lifetime: at most the limit's rate x lease_ttl more (token bucket, GCRA,
// sliding window). Fixed and sliding-counter windows stay exact: a lease never outlives the
// aligned window it was debited in, and a return reaches only that window.
//
// No clock and no I/O, as limit.hpp's steps.
#include <cstdint>
#include <optional>

#include "algorithm/limit.hpp"

namespace sluice::detail {

/// What one instance asks for.
struct lease_ask {
  std::int64_t want = 1;    ///< whole units (tokens, requests) it would like to hold
  std::int64_t askers = 1;  ///< instances that asked for this key recently, itself included
  std::int64_t ttl_ms = 0;  ///< how long a lease may be held (policy::lease_ttl)
};

struct limit_grant {
  /// As a check of p.cost: allowed when at least that much was granted; remaining is what
  /// the key has left after the grant; retry_after_ms when denied.
  limit_outcome outcome;
  std::int64_t granted = 0;   ///< whole units debited: 0 when denied, else >= p.cost's
  std::int64_t valid_ms = 0;  ///< the units may be spent for this long from the grant
  /// The server time the units were recorded at (ms): what a return names.
  std::int64_t at_ms = 0;
  /// How long to keep the state when granted (the check's reset_after_ms).
  std::int64_t ttl_ms = 0;
};

/// Debits up to ask.want whole units from `state` as one step, and at least p.cost's: never
/// more than the instance's fair share (what is available divided by ask.askers, rounded
/// down), but a cost that fits is always granted, so the last units of a limit are decided
/// one request at a time, exactly as checks. When less than p.cost is available nothing is
/// debited and the outcome is the check's denial.
limit_grant limit_lease(const limit_params& p, const lease_ask& ask,
                        std::optional<limit_state>& state, std::int64_t now_us);

/// Gives back `units` of a lease granted at `granted_at_ms` (limit_grant::at_ms) and not
/// spent: a refund, capped as the algorithm's refund is. A window's units go back only to
/// the window they were taken from: nothing when that window is over (fixed and sliding
/// counter windows), and to the log entry of the grant (sliding window), which may have
/// left the window already.
/// The outcome is what a check of one unit sees after; `write` and `ttl_ms` as limit_apply's.
limit_applied limit_lease_return(const limit_params& p, std::int64_t units,
                                 std::int64_t granted_at_ms, std::optional<limit_state>& state,
                                 std::int64_t now_us);

}  // namespace sluice::detail
