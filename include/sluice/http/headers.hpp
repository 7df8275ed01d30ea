#pragma once
/// Response headers and bodies for rate-limit decisions.
///
/// Fields sent for a decision (see docs/middleware.md):
///   X-RateLimit-Limit      the policy's capacity
///   X-RateLimit-Remaining  whole tokens left
///   X-RateLimit-Reset      seconds until the bucket is full again, rounded up
///   RateLimit-Policy       `"<policy>";q=<capacity>;w=<seconds to refill from empty>`
///   RateLimit              `"<policy>";r=<remaining>;t=<X-RateLimit-Reset, or Retry-After
///                          when denied>`
///   Retry-After            on denial only: whole seconds, rounded up from the exact time
/// RateLimit-Policy and RateLimit follow draft-ietf-httpapi-ratelimit-headers-11 (the
/// Structured Field syntax introduced in -08): a List of Items whose value is the policy
/// name as an sf-string, with Integer parameters.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/decision.hpp>
#include <sluice/http/evaluate.hpp>
#include <sluice/policy.hpp>

namespace sluice::http {

/// One response header field.
struct header_field {
  std::string name;
  std::string value;

  friend bool operator==(const header_field&, const header_field&) = default;
};

/// `d` in whole seconds, rounded up (1 ms -> 1, 1000 ms -> 1, 1001 ms -> 2, 0 -> 0).
std::chrono::seconds ceil_seconds(std::chrono::milliseconds d) noexcept;

/// The `w` of RateLimit-Policy for a token bucket: the seconds it takes to refill from
/// empty to full, ceil(capacity / refill_per_second), at least 1. Over that window a client
/// that starts with a full bucket can spend at most about 2 x capacity; a client pacing
/// itself at q per w never gets denied.
std::uint64_t policy_window_seconds(const sluice::policy& p) noexcept;

/// `s` as a Structured Field sf-string (quoted; `"` and `\` escaped; other bytes outside
/// 0x20..0x7E are replaced by `?`).
std::string sf_string(std::string_view s);

/// The header fields for decision `d` of policy `policy_name`, in the order listed above;
/// Retry-After only when `d.allowed` is false.
std::vector<header_field> rate_limit_headers(const decision& d, std::string_view policy_name,
                                             const sluice::policy& p);

/// The header fields for the binding rule of `e`; empty when `e` has no binding rule.
std::vector<header_field> rate_limit_headers(const evaluation& e);

/// An RFC 9457 problem details object.
struct problem {
  std::string type = "about:blank";  ///< a URI reference
  std::string title;                 ///< short, human-readable summary of the type
  unsigned status = 0;               ///< the HTTP status code
  std::string detail;                ///< this occurrence; omitted when empty
  std::string instance;              ///< omitted when empty
  /// Extension member `retry_after` (whole seconds), present when set.
  std::optional<std::uint64_t> retry_after;
  /// Extension member `violated-policies` (draft-ietf-httpapi-ratelimit-headers-11 §5.1),
  /// present when not empty.
  std::vector<std::string> violated_policies;
};

/// The problem type of draft-ietf-httpapi-ratelimit-headers-11 §5.1 (quota exceeded).
inline constexpr std::string_view quota_exceeded_type =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// The `Content-Type` of a problem body.
inline constexpr std::string_view problem_content_type = "application/problem+json";

/// The JSON text of `p` (members in the order type, title, status, detail, instance,
/// retry_after, violated-policies; strings escaped per RFC 8259; bytes that are not valid
/// UTF-8 become U+FFFD).
std::string to_json(const problem& p);

/// The problem for a denied decision of `policy_name` (or the binding rule of a denied
/// evaluation): type quota_exceeded_type, title `Quota exceeded`, the given status, a
/// detail naming the policy and the wait, retry_after = the Retry-After seconds, and
/// violated-policies (for an evaluation: the policies of every denying non-shadow rule).
problem rate_limited_problem(const decision& d, std::string_view policy_name,
                             unsigned status = 429);
problem rate_limited_problem(const evaluation& e, unsigned status = 429);

/// What a server should answer for an evaluation; what the adapters use.
struct rate_limit_response {
  bool allowed = true;
  /// 0 when allowed (let the request through); otherwise the deny status.
  unsigned status = 0;
  /// Add these to the response in either case (empty when no non-shadow rule decided).
  std::vector<header_field> headers;
  std::string body;  ///< the problem+json body when denied; empty when allowed
};

/// Builds the response for `e`; `deny_status` is what a denial answers (429 unless
/// e.g. nginx auth_request needs 403).
rate_limit_response make_response(const evaluation& e, unsigned deny_status = 429);

}  // namespace sluice::http
