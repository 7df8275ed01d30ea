#pragma once
// The memory backend's concurrency limits (backend::async_slot): one detail::slot_table per
// key in a small sharded map, each shard behind its own mutex. A key is forgotten as soon as
// its last holder is gone (released, or its lease ended and a step saw it), so the store
// holds only keys with holders (and the keys of holders that died, until the next step on
// that key or a sweep of their shard finds their leases ended). Private to the memory
// backend.
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include <sluice/backend.hpp>

#include "algorithm/slots.hpp"

namespace sluice::detail {

class slot_store {
 public:
  /// One step on `key`'s slots at `now_ms` (the backend's clock). Thread-safe. Answers
  /// errc::invalid_slot_id for an id that is not 32 hex digits.
  std::error_code apply(std::string_view key, const slot_request& request, std::int64_t now_ms,
                        slot_reply& out);

  /// Keys with at least one holder, lease ended or not (for tests). Thread-safe.
  std::size_t keys() const;

 private:
  // A step's key with its hash, computed once: it picks the shard and finds the table.
  struct probe {
    std::string_view key;
    std::size_t hash;
  };
  // A table's key keeps its hash: the map never hashes a key's text again (not when the
  // spare node is inserted, not when it walks a bucket's chain or rehashes), and a step
  // hashes its key once.
  struct hashed_key {
    std::string text;
    std::size_t hash = 0;
  };
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(const hashed_key& k) const noexcept { return k.hash; }
    std::size_t operator()(const probe& p) const noexcept { return p.hash; }
  };
  struct key_equal {
    using is_transparent = void;
    bool operator()(const hashed_key& a, const hashed_key& b) const noexcept {
      return a.hash == b.hash && a.text == b.text;
    }
    bool operator()(const probe& a, const hashed_key& b) const noexcept {
      return a.hash == b.hash && a.key == b.text;
    }
    bool operator()(const hashed_key& a, const probe& b) const noexcept { return (*this)(b, a); }
  };
  using table_map = std::unordered_map<hashed_key, slot_table, key_hash, key_equal>;
  struct alignas(64) shard {
    mutable std::mutex mu;
    table_map tables;
    table_map::node_type spare;      // one emptied key's node, reused by the next new key
    std::int64_t next_sweep_ms = 0;  // when to look for keys whose holders all died
  };
  static constexpr std::size_t shard_count = 16;
  // How often (by the backend's clock) a shard drops the keys whose every lease ended,
  // which no step has visited since: bounded memory for holders that died.
  static constexpr std::int64_t sweep_every_ms = 10'000;

  void sweep(shard& s, std::int64_t now_ms);

  std::array<shard, shard_count> shards_;
};

}  // namespace sluice::detail
