#pragma once
// How sluice_bench_rls sends one ShouldRateLimit call, apart from when it sends it:
//   grpc  gRPC's C++ client (callback API): the client library most services would use, and
//         about as heavy as the server it loads;
//   h2    the gRPC wire format (HTTP/2 POST, 5-byte message prefix, grpc-status trailer) over
//         nghttp2 on one thread: about as light as wrk is for /v1/check, and the HTTP/2 stack
//         h2load and (before oghttp2) Envoy itself load a rate limit service with.
// On a machine the tool shares with sluiced, a heavy client takes the cores the server would
// use; the light one lets the figure say how fast sluiced is.
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.pb.h"

namespace sluice::bench {

/// How one call ended.
struct call_result {
  bool ok = false;          ///< grpc-status 0 and a response that parses
  bool over_limit = false;  ///< overall_code OVER_LIMIT
  std::string error;        ///< why not ok
};

using call_done = std::function<void(const call_result&)>;

/// Thread-safe.
class rls_transport {
 public:
  virtual ~rls_transport() = default;
  /// Sends `req` (copied or serialized before this returns) on connection `channel` (taken
  /// modulo the number of connections). `done` runs once, on one of the transport's threads,
  /// and may call call() again.
  virtual void call(std::size_t channel,
                    const ::envoy::service::ratelimit::v3::RateLimitRequest& req,
                    call_done done) = 0;
};

/// `channels` connections to `target` (HOST:PORT), each established before these return;
/// they throw std::runtime_error when one cannot be.
std::unique_ptr<rls_transport> make_grpc_transport(const std::string& target, int channels);
std::unique_ptr<rls_transport> make_h2_transport(const std::string& target, int channels);

}  // namespace sluice::bench
