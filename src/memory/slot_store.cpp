#include "memory/slot_store.hpp"

#include <algorithm>
#include <functional>

#include <sluice/error.hpp>

namespace sluice::detail {

std::error_code slot_store::apply(std::string_view key, const slot_request& request,
                                  std::int64_t now_ms, slot_reply& out) {
  const auto id = parse_slot_id(request.id);
  if (!id) return errc::invalid_slot_id;
  const probe k{key, std::hash<std::string_view>{}(key)};
  // The high bits pick the shard: the map's buckets use the low ones.
  shard& s = shards_[(k.hash >> 56) % shard_count];
  std::lock_guard lock(s.mu);
  if (now_ms >= s.next_sweep_ms) sweep(s, now_ms);
  auto it = s.tables.find(k);
  if (it == s.tables.end()) {
    // Only an acquire adds a holder: the others on an unknown key change nothing.
    if (request.op != slot_operation::acquire) {
      out = slot_reply{};
      return {};
    }
    // A node kept from the last key that emptied: its key's and holders' storage is
    // reused, so a key that comes and goes (acquire, release, acquire...) allocates nothing.
    if (s.spare.empty()) {
      it = s.tables.emplace(hashed_key{std::string(key), k.hash}, slot_table{}).first;
    } else {
      s.spare.key().text.assign(key);
      s.spare.key().hash = k.hash;
      s.spare.mapped().holders.clear();
      it = s.tables.insert(std::move(s.spare)).position;
    }
  }
  const auto ttl_ms = static_cast<std::int64_t>(request.lease_ttl.count());
  slot_outcome o;
  switch (request.op) {
    case slot_operation::acquire:
      o = slots_acquire(it->second, *id, static_cast<std::int64_t>(request.limit), ttl_ms, now_ms);
      break;
    case slot_operation::release:
      o = slots_release(it->second, *id, now_ms);
      break;
    case slot_operation::renew:
      o = slots_renew(it->second, *id, ttl_ms, now_ms);
      break;
  }
  if (it->second.holders.empty()) {
    if (s.spare.empty()) {
      s.spare = s.tables.extract(it);
    } else {
      s.tables.erase(it);
    }
  }
  out.held = o.held;
  out.in_flight = static_cast<std::uint64_t>(o.in_flight);
  out.retry_after = std::chrono::milliseconds{o.retry_after_ms};
  out.expires_in = std::chrono::milliseconds{o.expires_in_ms};
  return {};
}

void slot_store::sweep(shard& s, std::int64_t now_ms) {
  std::erase_if(s.tables, [now_ms](const auto& kv) {
    return std::all_of(kv.second.holders.begin(), kv.second.holders.end(),
                       [now_ms](const slot_holder& h) { return h.ends_ms <= now_ms; });
  });
  s.next_sweep_ms = now_ms + sweep_every_ms;
}

std::size_t slot_store::keys() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.tables.size();
  }
  return n;
}

}  // namespace sluice::detail
