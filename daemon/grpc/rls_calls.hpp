#pragma once
// The methods sluiced's gRPC listener serves, apart from HTTP/2: a call's path, request
// message and deadline in (from h2_session), its answer out through a call_sink.
//   /envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit  decided by rls_decider
//   /grpc.health.v1.Health/Check   SERVING for "" and the rate limit service, NOT_SERVING
//                                  while draining, NOT_FOUND for any other service
//   anything else (Health/Watch included)   UNIMPLEMENTED
#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

#include <boost/asio/any_io_executor.hpp>

#include "grpc/h2_session.hpp"

namespace sluice::daemon {
class service;
}

namespace sluice::daemon::grpc {

/// Where a call's answer goes: its connection, which may be gone by the time the backend
/// decides (the call then holds only a weak_ptr to it).
class call_sink {
 public:
  virtual ~call_sink() = default;
  virtual void answer(std::int32_t stream_id, status_code code, std::string_view message,
                      std::string_view response) = 0;
};

/// Thread-safe.
class rls_calls {
 public:
  explicit rls_calls(service& svc) : svc_(svc) {}

  /// Serves `call`; the answer goes to `sink` (if it still exists) on `ex`, never inline
  /// for a backend with I/O, inline on the memory backend. Call on `ex`.
  void serve(const h2_call& call, const std::shared_ptr<call_sink>& sink,
             const boost::asio::any_io_executor& ex);

  /// Health/Check answers NOT_SERVING from now on.
  void set_draining() noexcept { draining_.store(true, std::memory_order_release); }

 private:
  void should_rate_limit(const h2_call& call, const std::shared_ptr<call_sink>& sink,
                         const boost::asio::any_io_executor& ex);
  void health_check(const h2_call& call, call_sink& sink);

  service& svc_;
  std::atomic<bool> draining_{false};
};

}  // namespace sluice::daemon::grpc
