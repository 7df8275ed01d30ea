#pragma once
// Concurrency limits' slots on the wire (lua/slots.lua), without I/O: the script_request of
// a slot step and its reply.
#include <string>
#include <system_error>

#include <sluice/backend.hpp>

#include "redis/resp.hpp"
#include "redis/script_request.hpp"

namespace sluice::redis {

/// lua/slots.lua's step `request` on `full_key` (a validated request).
script_request slot_script(std::string full_key, const slot_request& request);

/// The step's reply ({held, in flight, retry_after_ms, expires_in_ms}); an error code when it
/// is not one.
std::error_code to_slot_reply(const redisReply& reply, slot_reply& out) noexcept;

}  // namespace sluice::redis
