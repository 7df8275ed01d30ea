// The methods of sluiced's gRPC listener without HTTP/2 (grpc/rls_calls): ShouldRateLimit
// decided on the memory backend (answered inline), an undecodable request answered
// INVALID_ARGUMENT and counted, an unknown method (Health/Watch among them) UNIMPLEMENTED,
// Health/Check SERVING / NOT_FOUND / NOT_SERVING while draining.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "config.hpp"
#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "grpc/health/v1/health.pb.h"
#include "grpc/rls_calls.hpp"
#include "metrics.hpp"
#include "service.hpp"
#include "support/process_child.hpp"
#include "support/service_call.hpp"

namespace sluice::daemon::grpc {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;
namespace health = ::grpc::health::v1;

constexpr std::string_view rls_path =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view check_path = "/grpc.health.v1.Health/Check";

struct answer_seen {
  std::int32_t stream;
  status_code code;
  std::string message;
  std::string response;
};

class recording_sink final : public call_sink {
 public:
  void answer(std::int32_t stream_id, status_code code, std::string_view message,
              std::string_view response) override {
    answers.push_back({stream_id, code, std::string(message), std::string(response)});
  }
  std::vector<answer_seen> answers;
};

class DaemonGrpcCallsTest : public ::testing::Test {
 protected:
  DaemonGrpcCallsTest() : dir_(test::make_temp_dir("sluice-grpc-calls")) {
    std::ofstream(dir_ + "/limits.yaml")
        << "domain: edge\ndescriptors:\n  - key: tenant\n    rate_limit: {unit: hour, "
           "requests_per_unit: 1}\n";
    svc_ = std::make_unique<service>(
        parse_config(
            "policies: {api: {capacity: 5, refill_per_second: 1}}\nenvoy_rls:\n  config: " + dir_ +
                "/limits.yaml\n",
            "t.yaml"),
        std::vector<boost::asio::io_context*>{}, test::unit_clock());
    calls_ = std::make_unique<rls_calls>(*svc_);
  }
  ~DaemonGrpcCallsTest() override {
    calls_.reset();
    svc_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  // One call with `message` to `path` as stream `id`.
  void call(std::int32_t id, std::string_view path, const std::string& message) {
    calls_->serve(h2_call{id, path, message, std::nullopt}, sink_, ioc_.get_executor());
    ioc_.restart();  // a poll() that ran out of work leaves the context stopped
    ioc_.poll();
  }

  static std::string rls_request(const std::string& value) {
    pb::RateLimitRequest r;
    r.set_domain("edge");
    auto* e = r.add_descriptors()->add_entries();
    e->set_key("tenant");
    e->set_value(value);
    return r.SerializeAsString();
  }
  static std::string health_request(const std::string& name) {
    health::HealthCheckRequest r;
    r.set_service(name);
    return r.SerializeAsString();
  }

  std::string dir_;
  boost::asio::io_context ioc_;
  std::unique_ptr<service> svc_;
  std::unique_ptr<rls_calls> calls_;
  std::shared_ptr<recording_sink> sink_ = std::make_shared<recording_sink>();
};

TEST_F(DaemonGrpcCallsTest, ShouldRateLimitIsDecidedAndEncoded) {
  call(1, rls_path, rls_request("t"));
  call(3, rls_path, rls_request("t"));
  ASSERT_EQ(sink_->answers.size(), 2u);
  pb::RateLimitResponse first, second;
  ASSERT_EQ(sink_->answers[0].code, status_code::ok);
  ASSERT_TRUE(first.ParseFromString(sink_->answers[0].response));
  ASSERT_TRUE(second.ParseFromString(sink_->answers[1].response));
  EXPECT_EQ(first.overall_code(), pb::RateLimitResponse::OK);
  EXPECT_EQ(second.overall_code(), pb::RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(sink_->answers[1].stream, 3);
}

TEST_F(DaemonGrpcCallsTest, AnUndecodableRequestIsInvalidArgumentAndCounted) {
  call(1, rls_path, std::string("\x0a\xff\xff\xff", 4));
  ASSERT_EQ(sink_->answers.size(), 1u);
  EXPECT_EQ(sink_->answers[0].code, status_code::invalid_argument);
  EXPECT_EQ(sink_->answers[0].message, "grpc: error unmarshalling request");
  EXPECT_NE(svc_->stats().serialize().find(
                R"(sluice_rls_calls_total{code="invalid_argument",transport="grpc"} 1)"),
            std::string::npos);
}

TEST_F(DaemonGrpcCallsTest, UnknownMethodsAreUnimplemented) {
  call(1, "/grpc.health.v1.Health/Watch", health_request(""));
  call(3, "/no.Such/Method", "");
  ASSERT_EQ(sink_->answers.size(), 2u);
  EXPECT_EQ(sink_->answers[0].code, status_code::unimplemented);
  EXPECT_EQ(sink_->answers[1].code, status_code::unimplemented);
  EXPECT_EQ(sink_->answers[1].message, "unknown method /no.Such/Method");
}

TEST_F(DaemonGrpcCallsTest, HealthCheckServesTheServerAndTheRateLimitService) {
  auto status_of = [&](std::int32_t id, const std::string& name) {
    call(id, check_path, health_request(name));
    const auto& a = sink_->answers.back();
    EXPECT_EQ(a.stream, id);
    if (a.code != status_code::ok) return std::string("grpc ") + std::to_string(int(a.code));
    health::HealthCheckResponse r;
    EXPECT_TRUE(r.ParseFromString(a.response));
    return health::HealthCheckResponse::ServingStatus_Name(r.status());
  };
  EXPECT_EQ(status_of(1, ""), "SERVING");
  EXPECT_EQ(status_of(3, "envoy.service.ratelimit.v3.RateLimitService"), "SERVING");
  EXPECT_EQ(status_of(5, "other.Service"), "grpc 5");  // NOT_FOUND
  calls_->set_draining();
  EXPECT_EQ(status_of(7, ""), "NOT_SERVING");
}

}  // namespace
}  // namespace sluice::daemon::grpc
