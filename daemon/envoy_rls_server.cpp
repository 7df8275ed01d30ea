#include "envoy_rls_server.hpp"

#include <stdexcept>
#include <utility>

#include <absl/synchronization/mutex.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <spdlog/spdlog.h>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "envoy_rls.hpp"
#include "metrics.hpp"
#include "service.hpp"

namespace sluice::daemon {
namespace {

namespace pb = ::envoy::service::ratelimit::v3;
using steady = std::chrono::steady_clock;

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

// The callback API: each call gets the default unary reactor, finished by the decider's
// handler: inline on the memory backend, and on Redis where the decision completes (the
// connection's I/O thread, right after the reply), so no gRPC thread ever waits for the
// backend and no thread hands the answer to another.
class rate_limit_service final : public pb::RateLimitService::CallbackService {
 public:
  explicit rate_limit_service(service& svc) : svc_(svc) {}

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* ctx,
                                            const pb::RateLimitRequest* request,
                                            pb::RateLimitResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    const auto start = steady::now();
    try {
      auto& decider = svc_.rls();
      decider.decide(
          svc_.current(), from_proto(*request), boost::asio::any_io_executor{},
          [this, reactor, response, start](rls_answer a) {
            svc_.stats().rls_call("grpc", code_label(a), steady::now() - start);
            try {
              switch (a.what) {
                case rls_answer::kind::decided:
                  to_proto(a, *response);
                  reactor->Finish(grpc::Status::OK);
                  return;
                case rls_answer::kind::invalid:
                  reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, a.why));
                  return;
                case rls_answer::kind::unavailable:
                  reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, a.why));
                  return;
                case rls_answer::kind::disabled:
                  break;
              }
              reactor->Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, a.why));
            } catch (const std::exception& e) {
              svc_.stats().internal_error("request");
              reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, e.what()));
            }
          });
    } catch (const std::exception& e) {
      // A bug (or no memory): answered, counted, never the end of the process.
      svc_.stats().internal_error("request");
      spdlog::error("internal error while answering ShouldRateLimit: {}", e.what());
      reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL, "internal error"));
    }
    return reactor;
  }

 private:
  service& svc_;
};

// The PEM contents were read and checked when the config loaded (config.cpp).
std::shared_ptr<grpc::ServerCredentials> credentials(const envoy_rls_config::tls_config& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  const bool mutual = !tls.client_ca_pem.empty();
  grpc::SslServerCredentialsOptions opts(
      mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
             : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  opts.pem_root_certs = tls.client_ca_pem;
  opts.pem_key_cert_pairs.push_back({tls.key_pem, tls.cert_pem});
  return grpc::SslServerCredentials(opts);
}

}  // namespace

struct rls_server::impl {
  explicit impl(service& s) : svc(s), rls(s) {}
  service& svc;
  rate_limit_service rls;
  std::unique_ptr<grpc::Server> server;
  bool stopped = false;
};

rls_server::rls_server(service& svc) : impl_(std::make_unique<impl>(svc)) {}

rls_server::~rls_server() { shutdown(std::chrono::milliseconds{0}); }

std::uint16_t rls_server::start(const std::string& host, std::uint16_t port,
                                const envoy_rls_config::tls_config& tls) {
  // grpc.health.v1.Health from gRPC itself: Check and Watch, "" = the whole server.
  grpc::EnableDefaultHealthCheckService(true);
  // Debian builds Abseil without NDEBUG, so every absl::Mutex that gRPC locks also updates
  // a global lock-order graph for deadlock detection: about a tenth of a call's CPU in a
  // profile of ShouldRateLimit under load. The graph only reports; it never prevents.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  grpc::ServerBuilder builder;
  // Channelz keeps per-call counters for an introspection service sluiced does not offer.
  // (GRPC_ARG_MINIMAL_STACK stays off: it would drop the message size limit.)
  builder.AddChannelArgument(GRPC_ARG_ENABLE_CHANNELZ, 0);
  const auto address =
      (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  int bound = 0;
  builder.AddListeningPort(address, credentials(tls), &bound);
  builder.RegisterService(&impl_->rls);
  impl_->server = builder.BuildAndStart();
  if (!impl_->server || bound == 0) {
    impl_->server.reset();
    throw std::runtime_error("cannot listen on " + address);
  }
  if (auto* health = impl_->server->GetHealthCheckService()) {
    health->SetServingStatus(true);
    health->SetServingStatus(pb::RateLimitService::service_full_name(), true);
  }
  return static_cast<std::uint16_t>(bound);
}

void rls_server::shutdown(std::chrono::milliseconds deadline) {
  if (!impl_->server || impl_->stopped) return;
  impl_->stopped = true;
  if (auto* health = impl_->server->GetHealthCheckService()) health->Shutdown();
  impl_->server->Shutdown(std::chrono::system_clock::now() + deadline);
  impl_->server->Wait();
}

}  // namespace sluice::daemon
