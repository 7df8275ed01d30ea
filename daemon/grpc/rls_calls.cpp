#include "grpc/rls_calls.hpp"

#include <chrono>
#include <exception>
#include <string>

#include <spdlog/spdlog.h>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "envoy_rls.hpp"
#include "grpc/health/v1/health.pb.h"
#include "metrics.hpp"
#include "service.hpp"

namespace sluice::daemon::grpc {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;
namespace health = ::grpc::health::v1;
using steady = std::chrono::steady_clock;

constexpr std::string_view should_rate_limit_path =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view health_check_path = "/grpc.health.v1.Health/Check";
constexpr std::string_view rls_service_name = "envoy.service.ratelimit.v3.RateLimitService";
// grpc-go (the reference service's gRPC) answers a request that does not decode INTERNAL
// with this message; sluiced answers INVALID_ARGUMENT, what the input is, and what the
// libgrpc++ server before it was held to (tests/integration/envoy_rls_test.cpp): INTERNAL is
// for the server's own faults, which this is not.
constexpr std::string_view unmarshal_error = "grpc: error unmarshalling request";

std::string_view code_label(const rls_answer& a) {
  switch (a.what) {
    case rls_answer::kind::decided:
      return a.overall == rls_code::over_limit ? "over_limit" : "ok";
    case rls_answer::kind::invalid:
      return "invalid_argument";
    case rls_answer::kind::unavailable:
      return "unavailable";
    case rls_answer::kind::disabled:
      break;
  }
  return "disabled";
}

// Runs where the decision completes: inline on the memory backend, else on the call's
// connection thread (decide posts to its executor). The connection may be gone by then.
void answer_decision(const service& svc, metrics& stats, const std::weak_ptr<call_sink>& weak,
                     std::int32_t id, steady::time_point start, const rls_answer& a) {
  stats.rls_call("grpc", code_label(a), svc.now() - start);
  const auto sink = weak.lock();
  if (!sink) return;
  try {
    switch (a.what) {
      case rls_answer::kind::decided: {
        pb::RateLimitResponse resp;
        to_proto(a, resp);
        std::string out;
        resp.SerializeToString(&out);
        return sink->answer(id, status_code::ok, {}, out);
      }
      case rls_answer::kind::invalid:
        return sink->answer(id, status_code::invalid_argument, a.why, {});
      case rls_answer::kind::unavailable:
        return sink->answer(id, status_code::unavailable, a.why, {});
      case rls_answer::kind::disabled:
        break;
    }
    sink->answer(id, status_code::unimplemented, a.why, {});
  } catch (const std::exception& e) {
    stats.internal_error("request");
    sink->answer(id, status_code::internal, "internal error", {});
  }
}

}  // namespace

void rls_calls::serve(const h2_call& call, const std::shared_ptr<call_sink>& sink,
                      const boost::asio::any_io_executor& ex) {
  if (call.path == should_rate_limit_path) return should_rate_limit(call, sink, ex);
  if (call.path == health_check_path) return health_check(call, *sink);
  sink->answer(call.stream_id, status_code::unimplemented,
               "unknown method " + std::string(call.path), {});
}

void rls_calls::should_rate_limit(const h2_call& call, const std::shared_ptr<call_sink>& sink,
                                  const boost::asio::any_io_executor& ex) {
  const auto start = svc_.now();
  auto& stats = svc_.stats();
  pb::RateLimitRequest req;
  if (!req.ParseFromArray(call.message.data(), static_cast<int>(call.message.size()))) {
    stats.rls_call("grpc", "invalid_argument", svc_.now() - start);
    return sink->answer(call.stream_id, status_code::invalid_argument, unmarshal_error, {});
  }
  try {
    std::weak_ptr<call_sink> weak = sink;
    svc_.rls().decide(svc_.current(), from_proto(req), ex,
                      [&svc = svc_, &stats, weak = std::move(weak), id = call.stream_id,
                       start](rls_answer a) { answer_decision(svc, stats, weak, id, start, a); });
  } catch (const std::exception& e) {
    // A bug (or no memory): answered, counted, never the end of the process.
    stats.internal_error("request");
    spdlog::error("internal error while answering ShouldRateLimit: {}", e.what());
    sink->answer(call.stream_id, status_code::internal, "internal error", {});
  }
}

void rls_calls::health_check(const h2_call& call, call_sink& sink) {
  health::HealthCheckRequest req;
  if (!req.ParseFromArray(call.message.data(), static_cast<int>(call.message.size()))) {
    return sink.answer(call.stream_id, status_code::invalid_argument, unmarshal_error, {});
  }
  if (!req.service().empty() && req.service() != rls_service_name) {
    return sink.answer(call.stream_id, status_code::not_found, "unknown service", {});
  }
  health::HealthCheckResponse resp;
  resp.set_status(draining_.load(std::memory_order_acquire)
                      ? health::HealthCheckResponse::NOT_SERVING
                      : health::HealthCheckResponse::SERVING);
  std::string out;
  resp.SerializeToString(&out);
  sink.answer(call.stream_id, status_code::ok, {}, out);
}

}  // namespace sluice::daemon::grpc
