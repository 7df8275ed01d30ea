#pragma once
// What the caller of a decision script must do with its reply, decided from the reply alone:
// no socket, no clock, no state. Each fact about Redis's error replies ("NOSCRIPT means
// re-send as EVAL", "READONLY means the master moved") is written here once; the standalone,
// cluster and sentinel paths each apply the actions that make sense for their topology.
#include <cstdint>

#include "redis/cluster/redirect.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {

struct reply_action {
  enum class kind : std::uint8_t {
    done,               ///< not an error reply: decode it (a malformed one fails in the decoder)
    resend_as_eval,     ///< NOSCRIPT: the server lost its scripts; send the source once
    moved,              ///< MOVED: refresh the slot map, retry on `redirect.target`
    ask,                ///< ASK: retry once on `redirect.target`, preceded by ASKING
    retry_later,        ///< CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN: transient, not the script's
    rediscover_master,  ///< READONLY: the node was a master and is now a replica
    failed,             ///< any other error reply (malformed redirections too): a script error
  };
  kind what = kind::done;
  /// The parsed redirection, for `moved` and `ask` only.
  cluster::redirect redirect;
};

/// Classifies a script call's reply. Error codes match as prefixes of the error text, as
/// Redis sends them ("NOSCRIPT No matching script..."); a code later in the text is not one.
reply_action classify_reply(const redisReply& reply);

}  // namespace sluice::redis
