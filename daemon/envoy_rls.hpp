#pragma once
// Envoy's rate limit service (envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit)
// apart from its transports: one request's descriptors matched against the `envoy_rls`
// limits (src/envoy/rls_match.hpp) and decided by the daemon's limiter, all of a request's
// limits in one all-or-nothing step. The gRPC listener (envoy_rls_server.hpp) and
// POST /json on the HTTP listener (json_endpoint.cpp) both call rls_decider::decide.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>

#include "envoy/rls_match.hpp"

namespace envoy::service::ratelimit::v3 {
class RateLimitRequest;
class RateLimitResponse;
}  // namespace envoy::service::ratelimit::v3

namespace sluice::daemon {

struct runtime;
class metrics;

/// RateLimitResponse.Code; the numbers are the wire's.
enum class rls_code : std::uint8_t { unknown = 0, ok = 1, over_limit = 2 };

/// A ShouldRateLimit request, as the transports decode it.
struct rls_request {
  std::string domain;
  std::vector<envoy::rls_descriptor> descriptors;
  /// Hits of every descriptor without its own hits_addend; 0 (unset) means 1.
  std::uint32_t hits_addend = 0;
};

/// RateLimitResponse.DescriptorStatus.
struct rls_status {
  rls_code code = rls_code::ok;
  /// current_limit: set when a limit applied (not for no match, unlimited or replaced).
  bool has_limit = false;
  std::string name;
  std::uint32_t requests_per_unit = 0;
  envoy::rls_unit unit = envoy::rls_unit::unknown;
  std::uint32_t limit_remaining = 0;
  /// duration_until_reset: set with current_limit.
  std::chrono::milliseconds until_reset{0};
};

/// What a request gets.
struct rls_answer {
  enum class kind : std::uint8_t {
    decided,      ///< `overall` and `statuses` hold the answer
    invalid,      ///< the request cannot be decided (`why`): gRPC INVALID_ARGUMENT, HTTP 400
    unavailable,  ///< the backend failed and the failure mode is `unavailable` (`why`)
    disabled,     ///< no `envoy_rls` section in the config in force
  };
  kind what = kind::decided;
  rls_code overall = rls_code::ok;
  std::vector<rls_status> statuses;  ///< one per request descriptor, in request order
  /// response_headers_to_add (`envoy_rls.per_unit_headers`, then `response_headers`): name
  /// and value, in order.
  std::vector<std::pair<std::string, std::string>> response_headers;
  /// request_headers_to_add (`envoy_rls.request_headers`), for the request Envoy forwards.
  std::vector<std::pair<std::string, std::string>> request_headers;
  std::string why;
};

/// Decides ShouldRateLimit requests with the runtime in force. Thread-safe.
class rls_decider {
 public:
  explicit rls_decider(metrics& m);
  ~rls_decider();
  rls_decider(const rls_decider&) = delete;
  rls_decider& operator=(const rls_decider&) = delete;

  using handler = std::function<void(rls_answer)>;

  /// Decides `req` with `rt`'s limits and limiter. `done` is called exactly once, when every
  /// limit of the request is decided, which the backend's timeout bounds (a failing backend
  /// answers by the failure mode or `unavailable` then): on `ex` (at once when the last
  /// decision completes on its thread, as on the memory backend, else posted), or, when
  /// `ex` is empty, where the last decision completes (inline, or the Redis connection's I/O
  /// thread), so it must be short and must not block there. `done` must not throw.
  ///
  /// Per descriptor, as the reference service: its hits are its own hits_addend if set,
  /// else the request's (at least 1); 0 looks without spending (limiter::peek). The
  /// non-shadow limits that spend are decided together by limiter::check_all: when any
  /// denies, none spends. Shadow-mode limits are decided (and spend) on their own and
  /// answer OK whatever they decide. A limit of 0 requests, or hits above the limit, is
  /// over the limit without asking the backend (the request is then denied as a whole, and
  /// the other limits are only looked at). With `envoy_rls.shadow_mode` all of this is
  /// unchanged and only the overall code is OK.
  ///
  /// Quota-mode limits (a limit's `quota_mode`, or `envoy_rls.quota_mode`), as the
  /// reference: each is decided (and spends) on its own, its status says OVER_LIMIT when
  /// over, and they are grouped (by the descriptor's `backend_name` and
  /// `model_name_override` values when it has either, else by all its entries); a group is
  /// over when any of its limits is, and the request is over when every group is. They are
  /// decided before the other limits, so that a request they deny spends nothing there.
  void decide(std::shared_ptr<const runtime> rt, rls_request req, boost::asio::any_io_executor ex,
              handler done);

 private:
  struct job;
  // Starts the backend calls of `j`'s current phase; the last one back finishes it.
  void launch(const std::shared_ptr<job>& j);
  metrics& metrics_;
};

/// Decodes a RateLimitRequest message. Never fails: every proto value has a meaning.
rls_request from_proto(const ::envoy::service::ratelimit::v3::RateLimitRequest& m);
/// Encodes a decided answer.
void to_proto(const rls_answer& a, ::envoy::service::ratelimit::v3::RateLimitResponse& m);

/// POST /json: `body` in the proto's JSON mapping (as the reference's /json). Returns the
/// request, or std::nullopt with `why` saying what is wrong with the body.
std::optional<rls_request> parse_json_request(std::string_view body, std::string& why);
/// The answer's RateLimitResponse in the proto's JSON mapping (with a final newline).
std::string json_response(const rls_answer& a);

}  // namespace sluice::daemon
