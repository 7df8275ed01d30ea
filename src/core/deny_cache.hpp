#pragma once
// The over-limit cache: a key the backend denied with retry time T is denied in-process
// until T, saving the round trip for clients that keep knocking. Nothing is ever admitted
// from it, so exactness holds: T is counted from when the answer arrived, which is at or
// after the backend decided, so the local denial never ends before the backend's would.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sluice/clock.hpp>
#include <sluice/decision.hpp>
#include <sluice/policy.hpp>

#include "core/string_hash.hpp"

namespace sluice::detail {

class deny_cache {
 public:
  explicit deny_cache(std::shared_ptr<const clock> time_source, std::size_t max_entries = 100'000,
                      std::size_t shards = 16);

  /// A denial for `cost` tokens of `key` under `p`, if one is known to hold now.
  std::optional<decision> lookup(std::string_view key, const policy& p, std::uint64_t cost);
  /// Remembers a backend's (non-degraded) denial.
  void remember(std::string_view key, const policy& p, std::uint64_t cost, const decision& d);
  /// Drops what is remembered for `key` (its state was changed by a key operation).
  void forget(std::string_view key);
  /// Denials forgotten before they lapsed, to make room (a shard held max_entries / shards).
  std::uint64_t evicted() const noexcept { return evicted_.load(std::memory_order_relaxed); }

 private:
  struct entry {
    sluice::algorithm algorithm = sluice::algorithm::token_bucket;
    std::uint64_t capacity = 0;
    double refill_per_second = 0;
    std::uint64_t limit = 0;
    std::chrono::milliseconds window{0};
    std::uint64_t cost = 0;
    std::uint64_t remaining = 0;
    std::int64_t retry_at_us = 0;
    std::int64_t reset_at_us = 0;
  };
  struct alignas(64) shard {
    std::mutex mu;
    std::unordered_map<std::string, entry, string_hash, std::equal_to<>> map;
  };
  shard& shard_for(std::string_view key) noexcept {
    return shards_[string_hash{}(key) % shards_.size()];
  }

  void make_room(shard& s, const std::string& key, std::int64_t now);

  std::shared_ptr<const clock> clock_;
  std::vector<shard> shards_;
  std::size_t per_shard_limit_;
  std::atomic<std::uint64_t> evicted_{0};
};

}  // namespace sluice::detail
