// sluice_bench_rls's `grpc` transport: gRPC's C++ client on the callback API, one channel
// (HTTP/2 connection) per --channels.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "rls_transport.hpp"

namespace sluice::bench {
namespace {

namespace rls = ::envoy::service::ratelimit::v3;

class grpc_transport final : public rls_transport {
 public:
  grpc_transport(const std::string& target, int channels) {
    for (int c = 0; c < channels; ++c) {
      grpc::ChannelArguments args;
      // Separate connections: without this, channels with equal arguments share one.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("sluice.bench.channel", c);
      auto ch = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
      if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
        throw std::runtime_error("no gRPC connection to " + target);
      stubs_.push_back(rls::RateLimitService::NewStub(ch));
    }
  }

  void call(std::size_t channel, const rls::RateLimitRequest& req, call_done done) override {
    // A context serves one call only; the call's state lives until its callback.
    struct one_call {
      grpc::ClientContext ctx;
      rls::RateLimitRequest req;
      rls::RateLimitResponse resp;
      call_done done;
    };
    auto* c = new one_call;
    c->req = req;
    c->done = std::move(done);
    c->ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    stubs_[channel % stubs_.size()]->async()->ShouldRateLimit(
        &c->ctx, &c->req, &c->resp, [c](const grpc::Status& s) {
          std::unique_ptr<one_call> owned(c);
          call_result r;
          r.ok = s.ok();
          if (!r.ok) r.error = s.error_message();
          r.over_limit = r.ok && c->resp.overall_code() == rls::RateLimitResponse::OVER_LIMIT;
          c->done(r);
        });
  }

 private:
  std::vector<std::unique_ptr<rls::RateLimitService::Stub>> stubs_;
};

}  // namespace

std::unique_ptr<rls_transport> make_grpc_transport(const std::string& target, int channels) {
  return std::make_unique<grpc_transport>(target, channels);
}

}  // namespace sluice::bench
