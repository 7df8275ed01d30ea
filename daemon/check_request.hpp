#pragma once
// The body of POST /v1/check, read without building a JSON document: a SAX pass over the
// bytes keeps the three members it needs and notes what makes the body invalid, so a valid
// request allocates only its key and policy strings and the lexer's token buffers, not a map
// node and a string per member.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::daemon {

/// {"key": string, "policy": string, "cost": integer (optional, 1 when absent)}.
struct check_request {
  std::string key;
  std::string policy;
  /// A negative cost reads as 0 (out of range for every policy).
  std::uint64_t cost = 1;
};

/// Why a body is not a check request: the problem's `error` code and `detail` (status 400).
struct check_request_error {
  std::string_view code;  ///< "malformed_json" or "invalid_request"
  std::string detail;
};

/// Reads `body`. The first error in this order wins: not JSON; a member repeated in any
/// object (parsers disagree on which one counts, so neither does); not an object; a member
/// other than key, policy and cost (the first by name); key, then policy, missing or not a
/// string; cost not an integer. Range checks (empty key, cost vs capacity) are the caller's.
std::optional<check_request_error> parse_check_request(std::string_view body, check_request& out);

}  // namespace sluice::daemon
