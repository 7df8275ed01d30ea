#pragma once
// Concurrency limits' slots on the wire (lua/slots.lua), without I/O: the command of one or
// several slot steps (the steps that wait together on a connection share one script call:
// decision_batcher.hpp) and their replies.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <sluice/backend.hpp>

#include "redis/decide_command.hpp"
#include "redis/resp.hpp"
#include "redis/script_request.hpp"

namespace sluice::redis {

/// One step of a script call: views of a validated request on its prefixed key.
struct slot_step_args {
  std::string_view full_key;
  slot_operation op = slot_operation::acquire;
  std::string_view id;
  std::uint64_t limit = 1;
  std::chrono::milliseconds lease_ttl{0};
};

/// lua/slots.lua's step `request` on `full_key` (a validated request), as a script_request
/// (Cluster's redirections follow it as any other script call).
script_request slot_script(std::string full_key, const slot_request& request);

/// Appends `EVALSHA <slots> n <keys...> <4 args per step...>` (or EVAL) for `steps` (not
/// empty; on one hash slot on Cluster), applied in order. One step is exactly slot_script's
/// call.
void append_slot_command(std::string& out, script_call how, std::span<const slot_step_args> steps);

/// The step's reply ({held, in flight, retry_after_ms, expires_in_ms}); an error code when it
/// is not one (the script failed, or the step's key is no sorted set).
std::error_code to_slot_reply(const redisReply& reply, slot_reply& out) noexcept;

/// One step's answer in a call of several.
struct slot_result {
  std::error_code ec;
  slot_reply reply;
};

/// The replies of a call of `n` steps, in order, into `out` (n entries): an error code for the
/// whole call when the reply is not one (the script failed, or not 4n values), else each
/// step's reply or its own error (its key is no sorted set).
std::error_code to_slot_replies(const redisReply& reply, std::size_t n,
                                std::vector<slot_result>& out);

}  // namespace sluice::redis
