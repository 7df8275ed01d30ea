#pragma once
// What one limiter's quota leases did, per policy (limiter::lease_stats_by_policy) and in
// total (limiter_stats). Each leased key's entry holds its policy's counters, found once
// when the entry is made, so counting a check is one relaxed increment.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <sluice/limiter.hpp>
#include <sluice/policy.hpp>

namespace sluice::detail {

/// One policy's counters. Monotonic; shared with the returns still in flight.
struct lease_policy_counts {
  std::atomic<std::uint64_t> leases{0}, lease_denials{0}, leased_units{0}, expired_units{0},
      returned_units{0}, local_decisions{0};
  lease_stats load() const noexcept;
};

/// Two policies that lease the same way: what a ledger, its units and its counters depend on.
bool same_lease_limit(const policy& a, const policy& b) noexcept;

class lease_counter_registry {
 public:
  /// Counters are kept apart for this many distinct policies at most; the policies after
  /// them share one set, counted in the totals only (a program that makes a policy per
  /// request must not grow this without bound).
  static constexpr std::size_t max_policies = 1024;

  lease_counter_registry();
  /// `p`'s counters (made on first use). Thread-safe; takes a lock: call it when a key's
  /// entry is made, not per check.
  std::shared_ptr<lease_policy_counts> of(const policy& p);
  /// Every policy's counters, in the order they first leased.
  std::vector<std::pair<policy, lease_stats>> by_policy() const;
  /// Summed over every policy (and the overflow set).
  lease_stats total() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<policy, std::shared_ptr<lease_policy_counts>>> policies_;
  const std::shared_ptr<lease_policy_counts> overflow_;
};

}  // namespace sluice::detail
