#pragma once
// The body of POST /v1/check (and of /v1/peek and the admin endpoints, which take the same
// members and one more or one fewer), read without building a JSON document: a SAX pass over
// the bytes keeps the members it needs and notes what makes the body invalid, so a valid
// request allocates only its key and policy strings and the lexer's token buffers, not a map
// node and a string per member.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::daemon {

/// {"key": string, "policy": string, "cost": integer (optional, 1 when absent)}, and for
/// /v1/block "duration_ms": integer.
struct check_request {
  std::string key;
  std::string policy;
  /// A negative cost reads as 0 (out of range for every policy).
  std::uint64_t cost = 1;
  /// /v1/block's milliseconds; a negative one reads as 0 (out of range). 0 when absent.
  std::uint64_t duration_ms = 0;
};

/// Whether a body may, or must, carry a member besides key and policy (always required).
enum class member_use : std::uint8_t { refused, optional, required };

/// The members an endpoint takes. The default is /v1/check's (and /v1/peek's): an optional
/// cost, no duration_ms. A refused member is an unknown one.
struct request_members {
  member_use cost = member_use::optional;
  member_use duration_ms = member_use::refused;
};

/// Why a body is not a check request: the problem's `error` code and `detail` (status 400).
struct check_request_error {
  std::string_view code;  ///< "malformed_json" or "invalid_request"
  std::string detail;
};

/// Reads `body`. The first error in this order wins: not JSON; a member repeated in any
/// object (parsers disagree on which one counts, so neither does); not an object; a member
/// other than key, policy and those `members` takes (the first by name); key, then policy,
/// missing or not a string; cost, then duration_ms, missing when required or not an
/// integer. Range checks (empty key, cost vs capacity, duration) are the caller's. `out`
/// holds what was read even when the body is invalid (e.g. the key, for a log line).
std::optional<check_request_error> parse_check_request(std::string_view body, check_request& out,
                                                       const request_members& members = {});

}  // namespace sluice::daemon
