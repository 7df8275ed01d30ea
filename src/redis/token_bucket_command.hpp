#pragma once
// The token-bucket script on the wire, without I/O: the EVALSHA/EVAL command for
// lua/token_bucket.lua (ARGV per the comment at its top) and its reply as a decision.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

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

/// The error a caller sees for `r`: none for `decided`; a reply still lacking the script
/// after the EVAL fallback (noscript) counts as a script error.
std::error_code to_error(script_reply r) noexcept;

/// Reads the script's reply into the outcome it encodes (remaining as whole tokens).
script_reply parse_token_bucket_reply(const redisReply& reply,
                                      detail::token_bucket_outcome& out) noexcept;

/// parse_token_bucket_reply, then the public decision; an error code for every case but
/// `decided`.
std::error_code to_decision(const redisReply& reply, std::uint64_t capacity,
                            decision& out) noexcept;

/// One key of a multi-key script call: the prefixed key and its parameters.
struct multi_key {
  std::string_view full_key;
  detail::token_bucket_params params;
};

/// Appends `EVALSHA <sha> n <key1..keyn> <cap1> <rate1> <cost1> ... [now_ms]` of
/// lua/token_bucket_multi.lua (or EVAL with its source) to `out`.
void append_token_bucket_multi_command(std::string& out, script_call call,
                                       std::span<const multi_key> keys,
                                       std::optional<std::int64_t> now_ms = std::nullopt);

/// Appends `EVALSHA <sha> n <key1..keyn> <now_ms or ""> <count> <cap> <rate> <cost> ...` of
/// lua/token_bucket_batch.lua, n independent decisions (or EVAL with its source), to `out`:
/// consecutive keys with the same parameters share one run of four numbers.
void append_token_bucket_batch_command(std::string& out, script_call call,
                                       std::span<const multi_key> keys,
                                       std::optional<std::int64_t> now_ms = std::nullopt);

/// One item of the batch script's reply: its outcome (remaining as whole tokens), or the
/// error of that item alone (backend_script_error: the key holds no Sluice state;
/// backend_protocol_error: the item makes no sense).
struct batch_item {
  std::error_code ec;
  detail::token_bucket_outcome outcome;
};

/// Reads the batch script's reply of `n` items (one flat array of 4n values) into `out`;
/// `decided` when the reply has that shape (each item with its own result), else what went
/// wrong for the whole call.
script_reply parse_token_bucket_batch_reply(const redisReply& reply, std::size_t n,
                                            std::vector<batch_item>& out);

/// Appends `EVALSHA <sha> n <keys> <cap> <rate> <tokens back> ...` of
/// lua/token_bucket_refund.lua (`params.cost_ut` is what goes back), or EVAL.
void append_token_bucket_refund_command(std::string& out, script_call call,
                                        std::span<const multi_key> keys);

/// Reads the multi script's reply: `n` outcomes (remaining as whole tokens) in `out`.
script_reply parse_token_bucket_multi_reply(const redisReply& reply, std::size_t n,
                                            std::vector<detail::token_bucket_outcome>& out);

/// parse_token_bucket_multi_reply, then the public decisions (capacities[i] is item i's);
/// an error code for every case but `decided`.
std::error_code to_decisions(const redisReply& reply, std::span<const std::uint64_t> capacities,
                             std::vector<decision>& out);

}  // namespace sluice::redis
