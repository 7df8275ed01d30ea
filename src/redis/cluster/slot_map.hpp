#pragma once
// Which master serves which slot: ordered, non-overlapping slot ranges, built from a
// CLUSTER SLOTS reply. Pure data; the cluster backend swaps in a new map on refresh.
#include <hiredis/hiredis.h>

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "redis/cluster/key_slot.hpp"

namespace sluice::redis::cluster {

/// A node's endpoint as the cluster announces it.
struct node_address {
  std::string host;
  std::uint16_t port = 0;

  friend auto operator<=>(const node_address&, const node_address&) = default;
  /// "host:port" ("[v6]:port" for IPv6), for logs and map keys.
  std::string to_string() const;
};

struct slot_range {
  std::uint16_t first = 0;  ///< inclusive
  std::uint16_t last = 0;   ///< inclusive
  node_address master;
  std::vector<node_address> replicas;
};

class slot_map {
 public:
  slot_map() = default;
  /// Sorts `ranges` by first slot. Throws std::invalid_argument if two ranges overlap or a
  /// range is inverted or beyond the last slot.
  explicit slot_map(std::vector<slot_range> ranges);

  /// The range holding `slot`, or nullptr when no range covers it.
  const slot_range* range_of(std::uint16_t slot) const noexcept;
  /// The master serving `slot`, or nullptr when no range covers it.
  const node_address* master_of(std::uint16_t slot) const noexcept;
  const std::vector<slot_range>& ranges() const noexcept { return ranges_; }
  /// True when every one of the 16384 slots has a master.
  bool covers_all_slots() const noexcept;
  /// Every distinct master, sorted.
  std::vector<node_address> masters() const;
  /// Every distinct node (masters and replicas), sorted.
  std::vector<node_address> nodes() const;
  bool empty() const noexcept { return ranges_.empty(); }

 private:
  std::vector<slot_range> ranges_;
};

/// Builds a map from a CLUSTER SLOTS reply: an array of
/// `[first, last, [host, port, id, ...], [replica host, port, id, ...]...]`.
/// An empty host means "the node you asked" (`asked_host` is used); "?" (an unknown
/// endpoint) leaves the range out. std::nullopt, with `why` set, for a malformed reply.
std::optional<slot_map> parse_cluster_slots(const redisReply& reply, std::string_view asked_host,
                                            std::string* why = nullptr);

}  // namespace sluice::redis::cluster
