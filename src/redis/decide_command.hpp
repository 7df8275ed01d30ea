#pragma once
// The decision scripts on the wire, without I/O: the EVALSHA/EVAL command for
// lua/decide.lua (ARGV per the comment at its top) and its reply as a decision.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <sluice/decision.hpp>

#include "algorithm/limit.hpp"
#include "redis/resp.hpp"

namespace sluice::redis {

enum class script_call { evalsha, eval };

/// Appends `EVALSHA <sha> 1 <key> <algorithm> <a> <b> <cost> [now_ms]` (or EVAL with
/// the script's source) to `out`. `now_ms` is for tests that replay a history; production
/// calls leave it empty so the script reads the Redis server's clock.
void append_decide_command(std::string& out, script_call call, std::string_view full_key,
                           const detail::limit_params& params,
                           std::optional<std::int64_t> now_ms = std::nullopt);

/// How a reply to a decision script reads.
enum class script_reply {
  decided,    ///< `out` holds the decision
  noscript,   ///< the server does not have the script (send EVAL)
  failed,     ///< an error reply: errc::backend_script_error
  malformed,  ///< not {0|1, remaining, retry_after_ms, reset_after_ms}: backend_protocol_error
};

/// The error a caller sees for `r`: none for `decided`; a reply still lacking the script
/// after the EVAL fallback (noscript) counts as a script error.
std::error_code to_error(script_reply r) noexcept;

/// Reads the script's reply into the outcome it encodes (remaining in whole units).
script_reply parse_decide_reply(const redisReply& reply, detail::limit_outcome& out) noexcept;

/// Reads a reply of exactly `elements` integers whose first four are a decision's outcome
/// (lua/lease.lua's and the like): parse_decide_reply's checks on those four.
script_reply parse_outcome_reply(const redisReply& reply, std::size_t elements,
                                 detail::limit_outcome& out) noexcept;

/// parse_decide_reply, then the public decision; an error code for every case but
/// `decided`.
std::error_code to_decision(const redisReply& reply, std::uint64_t limit, decision& out) noexcept;

/// One key of a multi-key script call: the prefixed key and its parameters.
struct multi_key {
  std::string_view full_key;
  detail::limit_params params;
};

/// Appends `EVALSHA <sha> n <key1..keyn> <algorithm1> <a1> <b1> <cost1> ... [now_ms]` of
/// lua/decide_multi.lua (or EVAL with its source) to `out`.
void append_decide_multi_command(std::string& out, script_call call,
                                 std::span<const multi_key> keys,
                                 std::optional<std::int64_t> now_ms = std::nullopt);

/// Appends `EVALSHA <sha> n <key1..keyn> <now_ms or ""> <count> <algorithm> <a> <b> <cost> ...` of
/// lua/decide_batch.lua, n independent decisions (or EVAL with its source), to `out`:
/// consecutive keys with the same parameters share one run of five numbers.
void append_decide_batch_command(std::string& out, script_call call,
                                 std::span<const multi_key> keys,
                                 std::optional<std::int64_t> now_ms = std::nullopt);

/// One item of the batch script's reply: its outcome (remaining in whole units), or the
/// error of that item alone (backend_script_error: the key holds no Sluice state;
/// backend_protocol_error: the item makes no sense).
struct batch_item {
  std::error_code ec;
  detail::limit_outcome outcome;
};

/// Reads the batch script's reply of `n` items (one flat array of 4n values) into `out`;
/// `decided` when the reply has that shape (each item with its own result), else what went
/// wrong for the whole call.
script_reply parse_decide_batch_reply(const redisReply& reply, std::size_t n,
                                      std::vector<batch_item>& out);

/// Appends `EVALSHA <sha> n <keys> <algorithm> <a> <b> <cost back> ...` of
/// lua/refund.lua (`params.cost` is what goes back), or EVAL.
void append_refund_command(std::string& out, script_call call, std::span<const multi_key> keys);

/// Reads the multi script's reply: `n` outcomes (remaining in whole units) in `out`.
script_reply parse_decide_multi_reply(const redisReply& reply, std::size_t n,
                                      std::vector<detail::limit_outcome>& out);

/// parse_decide_multi_reply, then the public decisions (limits[i] is item i's limit_of);
/// an error code for every case but `decided`.
std::error_code to_decisions(const redisReply& reply, std::span<const std::uint64_t> limits,
                             std::vector<decision>& out);

}  // namespace sluice::redis
