#pragma once
// The token-bucket script on the wire, without I/O: the EVALSHA/EVAL command for
// lua/token_bucket.lua (ARGV per the comment at its top) and its reply as a decision.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include <sluice/decision.hpp>

#include "algorithm/token_bucket.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {

enum class script_call { evalsha, eval };

/// Appends `EVALSHA <sha> 1 <key> <capacity_ut> <rate> <cost_ut> [now_ms]` (or EVAL with
/// the script's source) to `out`. `now_ms` is for tests that replay a history; production
/// calls leave it empty so the script reads the Redis server's clock.
void append_token_bucket_command(std::string& out, script_call call, std::string_view full_key,
                                 const detail::token_bucket_params& params,
                                 std::optional<std::int64_t> now_ms = std::nullopt);

/// How a reply to the token-bucket script reads.
enum class script_reply {
  decided,    ///< `out` holds the decision
  noscript,   ///< the server does not have the script (send EVAL)
  failed,     ///< an error reply: errc::backend_script_error
  malformed,  ///< not {0|1, remaining, retry_after_ms, reset_after_ms}: backend_protocol_error
};

/// Reads the script's reply into the outcome it encodes (remaining as whole tokens).
script_reply parse_token_bucket_reply(const redisReply& reply,
                                      detail::token_bucket_outcome& out) noexcept;

/// parse_token_bucket_reply, then the public decision; an error code for every case but
/// `decided`.
std::error_code to_decision(const redisReply& reply, std::uint64_t capacity,
                            decision& out) noexcept;

}  // namespace sluice::redis
