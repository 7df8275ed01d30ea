#pragma once
// The redirections a cluster node answers with instead of running a command
// ("-MOVED <slot> <host>:<port>", "-ASK <slot> <host>:<port>"). Pure parsing.
#include <cstdint>
#include <optional>
#include <string_view>

#include "redis/cluster/slot_map.hpp"

namespace sluice::redis::cluster {

struct redirect {
  enum class kind : std::uint8_t {
    moved,  ///< the slot lives elsewhere for good: update the map, retry there
    ask,    ///< the slot is migrating: retry once on the target, preceded by ASKING
  };
  kind type = kind::moved;
  std::uint16_t slot = 0;
  /// Where to go. An empty host (Redis answers ":<port>" when it does not know the
  /// endpoint's name) means the host of the node that answered.
  node_address target;
};

/// Parses the text of an error reply; std::nullopt for any other error (or malformed text).
std::optional<redirect> parse_redirect(std::string_view error_text);

}  // namespace sluice::redis::cluster
