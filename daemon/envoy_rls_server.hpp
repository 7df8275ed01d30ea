#pragma once
// The gRPC listener of sluiced's Envoy rate limit service: serves
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (decided by the service's
// rls_decider with the config in force, so SIGHUP reloads apply to the next call) and
// grpc.health.v1.Health/Check. Plaintext HTTP/2, as Envoy's rate limit cluster connects by
// default, or TLS (and mutual TLS) when the config's envoy_rls.tls says so. HTTP/2 is
// nghttp2's, driven by sluiced's own unary gRPC server (daemon/grpc/): its connections run
// on the daemon's worker io_contexts, bounded by the envoy_rls options (docs/ENVOY.md).
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "config.hpp"

namespace sluice::daemon {

class service;

/// Not thread-safe (start, drain and shutdown from one thread); its connections run on the
/// workers, a call's answer on its connection's worker.
class rls_server {
 public:
  /// `ioc` runs the acceptor and the drain; `workers` (none: `ioc` alone) the connections,
  /// each io_context on one thread only. The options are the config's envoy_rls (read once).
  rls_server(service& svc, boost::asio::io_context& ioc,
             std::vector<boost::asio::io_context*> workers);
  ~rls_server();
  rls_server(const rls_server&) = delete;
  rls_server& operator=(const rls_server&) = delete;

  /// Listens on `host`:`port` (0: a free port) and starts serving, over TLS when `tls` is
  /// enabled (requiring and verifying client certificates when it has a client CA). Returns
  /// the bound port. Throws std::runtime_error when the address cannot be bound.
  std::uint16_t start(const std::string& host, std::uint16_t port,
                      const envoy_rls_config::tls_config& tls = {});

  /// Puts the TLS credentials of a reloaded config in force for the next connections (the
  /// open ones keep theirs): its certificate, key, client CA and client_san. The files are
  /// also watched (every 2 s) and used again when they change. False, with the old
  /// credentials kept and the reason logged, when they cannot be used or when the reload
  /// would turn TLS on or off (a restart does that). From the thread that runs `ioc`.
  bool reload_tls(const envoy_rls_config::tls_config& tls);

  /// Stops accepting, sends every connection a GOAWAY (the calls open finish, then it
  /// closes) and answers health checks NOT_SERVING; calls `done` on `ioc` once no
  /// connection is left, or after `deadline`, having closed the rest. Call once.
  void drain(std::chrono::milliseconds deadline, std::function<void()> done);

  /// drain(), waiting for it: from a thread that runs none of the io_contexts, while they
  /// run. Idempotent.
  void shutdown(std::chrono::milliseconds deadline);

 private:
  struct listener;
  std::shared_ptr<listener> impl_;
};

}  // namespace sluice::daemon
