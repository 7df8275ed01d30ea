#include "core/lease_counters.hpp"

namespace sluice::detail {

lease_stats lease_policy_counts::load() const noexcept {
  constexpr auto r = std::memory_order_relaxed;
  return {.leases = leases.load(r),
          .lease_denials = lease_denials.load(r),
          .leased_units = leased_units.load(r),
          .lease_units_expired = expired_units.load(r),
          .lease_units_returned = returned_units.load(r),
          .leased_decisions = local_decisions.load(r)};
}

bool same_lease_limit(const policy& a, const policy& b) noexcept {
  return a.algorithm == b.algorithm && a.capacity == b.capacity &&
         a.refill_per_second == b.refill_per_second && a.limit == b.limit && a.window == b.window &&
         a.lease_ttl == b.lease_ttl;
}

lease_counter_registry::lease_counter_registry()
    : overflow_(std::make_shared<lease_policy_counts>()) {}

std::shared_ptr<lease_policy_counts> lease_counter_registry::of(const policy& p) {
  std::lock_guard lock(mu_);
  for (const auto& [known, counts] : policies_)
    if (same_lease_limit(known, p)) return counts;
  if (policies_.size() >= max_policies) return overflow_;
  return policies_.emplace_back(p, std::make_shared<lease_policy_counts>()).second;
}

std::vector<std::pair<policy, lease_stats>> lease_counter_registry::by_policy() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<policy, lease_stats>> out;
  out.reserve(policies_.size());
  for (const auto& [p, counts] : policies_) out.emplace_back(p, counts->load());
  return out;
}

lease_stats lease_counter_registry::total() const {
  lease_stats sum = overflow_->load();
  for (const auto& [p, s] : by_policy()) sum += s;
  return sum;
}

}  // namespace sluice::detail
