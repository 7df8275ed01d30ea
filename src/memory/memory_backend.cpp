// The memory backend: the token-bucket math of src/algorithm on a sharded hash map.
#include <sluice/memory_backend.hpp>

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "algorithm/token_bucket.hpp"

namespace sluice {
namespace {

struct string_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

struct entry {
  detail::token_bucket_state bucket;
  std::int64_t full_at_ms = 0;  // from then on the bucket is full: the entry can go
};

// alignas keeps two shards' mutexes off one cache line.
struct alignas(64) shard {
  std::mutex mu;
  std::unordered_map<std::string, entry, string_hash, std::equal_to<>> map;
  std::int64_t next_sweep_ms = 0;  // no entry expires before this
};

class memory_backend final : public backend {
 public:
  explicit memory_backend(memory_options o)
      : clock_(o.time_source ? std::move(o.time_source) : default_clock()),
        // Never more shards than keys, so shards x per-shard limit stays within max_keys.
        shards_(std::clamp<std::size_t>(o.shards, 1, std::max<std::size_t>(1, o.max_keys))),
        per_shard_limit_(std::max<std::size_t>(1, o.max_keys / shards_.size())) {}

  std::error_code decide(std::string_view key, const policy& p, std::uint64_t cost,
                         decision& out) override {
    const std::int64_t now_ms = clock_->now().count() / 1000;
    const auto params = detail::to_params(p, cost);
    shard& s = shards_[string_hash{}(key) % shards_.size()];
    std::lock_guard lock(s.mu);

    auto it = s.map.find(key);
    std::optional<detail::token_bucket_state> prev;
    if (it != s.map.end() && it->second.full_at_ms > now_ms) prev = it->second.bucket;

    const auto o = detail::token_bucket_decide(params, prev, now_ms);
    if (o.allowed) {
      const entry e{o.next, now_ms + o.reset_after_ms};
      if (it != s.map.end()) {
        it->second = e;
      } else {
        make_room(s, now_ms);
        s.map.emplace(std::string(key), e);
      }
      s.next_sweep_ms = std::min(s.next_sweep_ms, e.full_at_ms);
    }
    out = detail::to_decision(o, p.capacity);
    return {};
  }

  void async_decide(std::string_view key, const policy& p, std::uint64_t cost,
                    decide_handler handler) override {
    decision d;
    auto ec = decide(key, p, cost, d);
    handler(ec, d);
  }

 private:
  // Keeps a shard within its share of max_keys: first forget buckets that are full again
  // (they decide exactly as a missing key does); only if none is, forget an arbitrary one.
  void make_room(shard& s, std::int64_t now_ms) {
    if (s.map.size() < per_shard_limit_) return;
    if (now_ms >= s.next_sweep_ms) {
      std::int64_t next = std::numeric_limits<std::int64_t>::max();
      std::erase_if(s.map, [&](const auto& kv) {
        if (kv.second.full_at_ms <= now_ms) return true;
        next = std::min(next, kv.second.full_at_ms);
        return false;
      });
      s.next_sweep_ms = next;
    }
    if (s.map.size() >= per_shard_limit_) s.map.erase(s.map.begin());
  }

  std::shared_ptr<const clock> clock_;
  std::vector<shard> shards_;
  std::size_t per_shard_limit_;
};

}  // namespace

std::shared_ptr<backend> make_memory_backend(memory_options options) {
  return std::make_shared<memory_backend>(std::move(options));
}

}  // namespace sluice
