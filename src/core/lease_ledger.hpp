#pragma once
// One instance's side of a quota lease (issue 33) on one key: the units it holds, which
// lease each came from and when that lease ends, and what to ask for next. Pure: no clock
// (times in ms are passed in), no I/O, not thread-safe (its owner serialises calls).
//
// Units are spent from the lease that ends first. A lease is held from when it was asked
// for, not from when its grant arrived: the server debited the units after the ask left, so
// the lease ends here no later than valid_ms after the debit, whatever the round trip.
// The next lease is asked for while what is held would still last a while at the recent
// rate, one ask at a time, so a busy instance never stalls at a lease's end.
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace sluice::detail {

/// Units of one lease: how many are left, when the lease ends here, and the server time it
/// was granted at (what a return names).
struct lease_lot {
  std::int64_t units = 0;
  std::int64_t ends_ms = 0;
  std::int64_t granted_at_ms = 0;
  friend bool operator==(const lease_lot&, const lease_lot&) = default;
};

/// What came back for an ask (limit_grant's figures, lease.hpp).
struct lease_reply {
  std::int64_t granted = 0;         ///< units; 0: denied (or the ask failed)
  std::int64_t valid_ms = 0;        ///< from the ask
  std::int64_t granted_at_ms = 0;   ///< the server's time of the grant
  std::int64_t retry_after_ms = 0;  ///< when denied: until a unit is there again
};

class lease_ledger {
 public:
  /// `ttl_ms`: how long a lease is held (policy::lease_ttl); `max_units`: the most one ask
  /// may want (the policy's limit); `min_hold_ms`: the least a denial holds back asks (see
  /// ask_done).
  lease_ledger(std::int64_t ttl_ms, std::int64_t max_units, std::int64_t min_hold_ms = 0) noexcept;

  /// A request for `units` came (spent here or not): demand, which sizes the next ask.
  void note_demand(std::int64_t units, std::int64_t now_ms) noexcept;
  /// Spends `units` from the leases held now, if they hold that many.
  bool try_spend(std::int64_t units, std::int64_t now_ms);

  /// Whether to ask for a lease now, and for how many units: nothing while an ask is in
  /// flight or a denial holds (denied_for); else when what is held, and still held a quarter of a
  /// ttl from now, is less than half of the recent demand per ttl (or less than `need`, a request's
  /// cost that could not be spent). The ask is then in flight until ask_done().
  std::optional<std::int64_t> next_ask(std::int64_t now_ms, std::int64_t need = 0);
  /// The ask in flight, sent at `asked_at_ms`, was answered. Its units are held for
  /// valid_ms from the ask (the server debited them after it left). The requests that
  /// waited for it (`waiting` units) are decided by it first, as checks are by their reply,
  /// whenever it arrives: returns the units they get (at most `waiting`); the rest is held.
  /// A denial holds back further asks until its retry_after_ms (at least min_hold_ms) has
  /// passed, or a ttl, or this instance gives units back, whichever comes first: refused
  /// instances do not poll the server for every unit that comes back, and units given back
  /// are not left unused. A grant of less than was asked for (the instance's fair share of a
  /// limit that is running out) holds further asks for min_hold_ms from the ask in the same
  /// way, once its units are spent: near exhaustion an instance asks a few times per ttl for
  /// what came back meanwhile, not once per unit.
  std::int64_t ask_done(const lease_reply& reply, std::int64_t asked_at_ms,
                        std::int64_t waiting = 0);
  /// The ask in flight failed (no reply): nothing held back.
  void ask_failed() noexcept { asking_ = false; }
  /// How long a request that cannot be spent here is to be denied without asking: the rest
  /// of the last denial's retry_after_ms (0: ask).
  std::int64_t denied_for(std::int64_t now_ms) const noexcept {
    return denied_until_ms_ > now_ms ? denied_until_ms_ - now_ms : 0;
  }
  bool asking() const noexcept { return asking_; }

  /// Leases that ended with units left (each once): to give back.
  std::vector<lease_lot> take_ended(std::int64_t now_ms);
  /// Everything held (each once), as when the limiter stops.
  std::vector<lease_lot> take_all();
  /// Units held and not ended at now_ms.
  std::int64_t held(std::int64_t now_ms) const noexcept;
  /// Units spent (or wanted) per ttl lately: the larger of the last full period's and the
  /// current one's, at least 1.
  std::int64_t demand() const noexcept;

 private:
  void roll_period(std::int64_t now_ms) noexcept;

  const std::int64_t ttl_ms_;
  const std::int64_t max_units_;
  const std::int64_t min_hold_ms_;
  std::deque<lease_lot> lots_;  // by ends_ms, earliest first
  bool asking_ = false;
  std::int64_t asked_units_ = 0;  // what the ask in flight wants
  std::int64_t denied_until_ms_ = 0;
  std::int64_t period_start_ms_ = 0;
  std::int64_t this_period_ = 0;
  std::int64_t last_period_ = 0;
};

}  // namespace sluice::detail
