#pragma once
// The gRPC listener of sluiced's Envoy rate limit service: serves
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (decided by the service's
// rls_decider with the config in force, so SIGHUP reloads apply to the next call) and the
// standard health service grpc.health.v1.Health (gRPC's own default implementation).
// Plaintext HTTP/2, as Envoy's rate limit cluster connects by default, or TLS (and mutual
// TLS) when the config's envoy_rls.tls says so.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "config.hpp"

namespace sluice::daemon {

class service;

/// Not thread-safe (start and shutdown from one thread); the calls it serves run on gRPC's
/// own threads and complete on the rls_decider's.
class rls_server {
 public:
  explicit rls_server(service& svc);
  ~rls_server();
  rls_server(const rls_server&) = delete;
  rls_server& operator=(const rls_server&) = delete;

  /// Listens on `host`:`port` (0: a free port) and starts serving, over TLS when `tls` is
  /// enabled (requiring and verifying client certificates when it has a client CA). Returns
  /// the bound port. Throws std::runtime_error when the address cannot be bound.
  std::uint16_t start(const std::string& host, std::uint16_t port,
                      const envoy_rls_config::tls_config& tls = {});

  /// Stops accepting calls, lets the calls in flight finish for up to `deadline`, then
  /// cancels the rest; health answers NOT_SERVING meanwhile. Blocks until done. Idempotent.
  void shutdown(std::chrono::milliseconds deadline);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice::daemon
