#include "core/lease_ledger.hpp"

#include <algorithm>

namespace sluice::detail {

lease_ledger::lease_ledger(std::int64_t ttl_ms, std::int64_t max_units,
                           std::int64_t min_hold_ms) noexcept
    : ttl_ms_(std::max<std::int64_t>(1, ttl_ms)),
      max_units_(std::max<std::int64_t>(1, max_units)),
      min_hold_ms_(std::max<std::int64_t>(0, min_hold_ms)) {}

void lease_ledger::roll_period(std::int64_t now_ms) noexcept {
  if (now_ms < period_start_ms_ + ttl_ms_) return;
  // A period with no call in it at all was a period of no demand.
  last_period_ = now_ms < period_start_ms_ + 2 * ttl_ms_ ? this_period_ : 0;
  this_period_ = 0;
  period_start_ms_ = now_ms;
}

std::int64_t lease_ledger::demand() const noexcept {
  return std::clamp<std::int64_t>(std::max(last_period_, this_period_), 1, max_units_);
}

void lease_ledger::note_demand(std::int64_t units, std::int64_t now_ms) noexcept {
  roll_period(now_ms);
  this_period_ += units;
}

bool lease_ledger::try_spend(std::int64_t units, std::int64_t now_ms) {
  if (held(now_ms) < units) return false;
  std::int64_t left = units;
  for (auto& lot : lots_) {
    if (lot.ends_ms <= now_ms) continue;  // ended: take_ended() gives it back
    const std::int64_t take = std::min(left, lot.units);
    lot.units -= take;
    left -= take;
    if (left == 0) break;
  }
  // Spent-out lots have nothing to give back.
  std::erase_if(lots_, [](const lease_lot& l) { return l.units == 0; });
  return true;
}

std::int64_t lease_ledger::held(std::int64_t now_ms) const noexcept {
  std::int64_t n = 0;
  for (const auto& lot : lots_) {
    if (lot.ends_ms > now_ms) n += lot.units;
  }
  return n;
}

std::optional<std::int64_t> lease_ledger::next_ask(std::int64_t now_ms, std::int64_t need) {
  if (asking_ || denied_for(now_ms) > 0) return std::nullopt;
  roll_period(now_ms);
  const std::int64_t want = demand();
  const std::int64_t lasting = held(now_ms + ttl_ms_ / 4);
  if (lasting >= need && 2 * lasting >= want) return std::nullopt;
  asking_ = true;
  asked_units_ = std::clamp(std::max(want, need), std::int64_t{1}, max_units_);
  return asked_units_;
}

std::int64_t lease_ledger::ask_done(const lease_reply& reply, std::int64_t asked_at_ms,
                                    std::int64_t waiting) {
  asking_ = false;
  if (reply.granted <= 0) {
    // At most a ttl: by then the leases that other instances hold have ended, and what
    // they did not spend went back.
    denied_until_ms_ =
        asked_at_ms + std::min(std::max(reply.retry_after_ms, min_hold_ms_), ttl_ms_);
    return 0;
  }
  if (reply.granted < asked_units_) denied_until_ms_ = asked_at_ms + min_hold_ms_;
  const std::int64_t served = std::clamp<std::int64_t>(waiting, 0, reply.granted);
  if (reply.granted - served <= 0 || reply.valid_ms <= 0) return served;
  const lease_lot lot{reply.granted - served, asked_at_ms + std::min(reply.valid_ms, ttl_ms_),
                      reply.granted_at_ms};
  const auto at =
      std::upper_bound(lots_.begin(), lots_.end(), lot.ends_ms,
                       [](std::int64_t ends, const lease_lot& l) { return ends < l.ends_ms; });
  lots_.insert(at, lot);
  return served;
}

std::vector<lease_lot> lease_ledger::take_ended(std::int64_t now_ms) {
  std::vector<lease_lot> ended;
  while (!lots_.empty() && lots_.front().ends_ms <= now_ms) {
    ended.push_back(lots_.front());
    lots_.pop_front();
  }
  // What goes back is there to ask for again.
  if (!ended.empty()) denied_until_ms_ = 0;
  return ended;
}

std::vector<lease_lot> lease_ledger::take_all() {
  std::vector<lease_lot> all(lots_.begin(), lots_.end());
  lots_.clear();
  return all;
}

}  // namespace sluice::detail
