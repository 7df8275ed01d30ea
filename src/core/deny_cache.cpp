#include "core/deny_cache.hpp"

#include <algorithm>

#include "algorithm/token_bucket.hpp"

namespace sluice::detail {

deny_cache::deny_cache(std::shared_ptr<const clock> time_source, std::size_t max_entries,
                       std::size_t shards)
    : clock_(std::move(time_source)),
      shards_(std::clamp<std::size_t>(shards, 1, std::max<std::size_t>(1, max_entries))),
      per_shard_limit_(std::max<std::size_t>(1, max_entries / shards_.size())) {}

std::optional<decision> deny_cache::lookup(std::string_view key, const policy& p,
                                           std::uint64_t cost) {
  shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return std::nullopt;
  const entry& e = it->second;
  const std::int64_t now = clock_->now().count();
  if (now >= e.retry_at_us) {
    s.map.erase(it);
    return std::nullopt;
  }
  // Only a request at least as expensive, under the same limit, is surely still denied.
  if (e.algorithm != p.algorithm || e.capacity != p.capacity ||
      e.refill_per_second != p.refill_per_second || e.limit != p.limit || e.window != p.window ||
      cost < e.cost) {
    return std::nullopt;
  }
  decision d;
  d.limit = limit_of(p);
  d.remaining = e.remaining;
  d.retry_after = std::chrono::milliseconds{ceil_div(e.retry_at_us - now, 1000)};
  d.reset_after =
      std::chrono::milliseconds{ceil_div(std::max<std::int64_t>(0, e.reset_at_us - now), 1000)};
  return d;
}

void deny_cache::forget(std::string_view key) {
  shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  if (auto it = s.map.find(key); it != s.map.end()) s.map.erase(it);
}

void deny_cache::remember(std::string_view key, const policy& p, std::uint64_t cost,
                          const decision& d) {
  const std::int64_t now = clock_->now().count();
  const entry e{p.algorithm,
                p.capacity,
                p.refill_per_second,
                p.limit,
                p.window,
                cost,
                d.remaining,
                now + std::chrono::microseconds(d.retry_after).count(),
                now + std::chrono::microseconds(d.reset_after).count()};
  shard& s = shard_for(key);
  std::lock_guard lock(s.mu);
  if (auto it = s.map.find(key); it != s.map.end()) {
    it->second = e;
    return;
  }
  std::string owned(key);
  if (s.map.size() >= per_shard_limit_) make_room(s, owned, now);
  s.map.emplace(std::move(owned), e);
}

// Room for one entry in bounded work (a client that keeps sending new denied keys must not
// make each denial a scan of the shard): look at up to scan_budget entries from the new
// key's hash bucket on, drop those that lapsed; if none had, drop the one of them that
// lapses first. Forgetting a live denial is harmless to exactness (nothing is ever admitted
// from this cache): that key's next check just goes to the backend again. Counted.
void deny_cache::make_room(shard& s, const std::string& key, std::int64_t now) {
  constexpr std::size_t scan_budget = 16;
  const std::size_t buckets = s.map.bucket_count();
  std::vector<std::string> lapsed;
  const std::string* soonest = nullptr;
  std::int64_t soonest_at = 0;
  std::size_t seen = 0;
  for (std::size_t i = 0, b = s.map.bucket(key); i < buckets && seen < scan_budget;
       ++i, b = (b + 1) % buckets) {
    for (auto it = s.map.begin(b); it != s.map.end(b) && seen < scan_budget; ++it, ++seen) {
      if (it->second.retry_at_us <= now) {
        lapsed.push_back(it->first);
      } else if (soonest == nullptr || it->second.retry_at_us < soonest_at) {
        soonest = &it->first;
        soonest_at = it->second.retry_at_us;
      }
    }
  }
  for (const auto& k : lapsed) s.map.erase(k);
  if (lapsed.empty() && soonest != nullptr) {
    s.map.erase(*soonest);
    evicted_.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace sluice::detail
