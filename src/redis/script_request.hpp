#pragma once
// A script call that is neither a decision nor a multi-key decision: a quota lease, its
// return, or a slot step sent alone (lua/lease.lua, lua/slots.lua; slot steps are batched by
// decision_batcher::submit_slot, and go alone when a Cluster client follows a redirection or
// has no slot map yet). It goes through the same one queue
// per connection as every other script call (decision_batcher::submit_call), with the same
// admission, deadline and NOSCRIPT re-send (script_exec.hpp); on Redis Cluster, through the
// cluster client's routing and redirections as a multi-key call does. Its reply goes back
// undecoded: the caller's reply handler reads it (lease_command.hpp, slot_command.hpp).
#include <functional>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "redis/decide_command.hpp"
#include "redis/resp.hpp"
#include "redis/scripts.hpp"

namespace sluice::redis {

struct script_request {
  const detail::lua_script* script = nullptr;
  /// Prefixed keys, on one hash slot (Cluster); the first one routes the call.
  std::vector<std::string> keys;
  std::vector<std::string> args;

  /// Appends `EVALSHA <sha> <n> <keys...> <args...>` (or EVAL with the source) to `out`.
  void append(std::string& out, script_call how) const;
};

/// The reply of a script_request, once: an error (the reply is null), or the reply, which
/// may be an error reply (the script's own, or one no redirection could mend).
using reply_handler = std::function<void(std::error_code, reply_ptr)>;

}  // namespace sluice::redis
