#pragma once
// TLS for Redis connections: the OpenSSL context a backend loads once from its URL's
// options, and the per-connection settings (SNI, verified name) connection.cpp applies.
#include <sluice/redis_backend.hpp>

#include <memory>
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace sluice::redis {

/// What a connection needs for TLS; `context` null means plain TCP.
struct tls_config {
  std::shared_ptr<boost::asio::ssl::context> context;
  bool verify = true;
  /// Sent as SNI (unless it is an IP address) and checked against the certificate when
  /// `verify`; empty: the connection's host.
  std::string server_name;
};

/// A TLS client context for `tls` (null when !tls.enabled): TLS 1.2 or later, the CA file
/// (or the system's CAs) to verify servers, the client certificate and key. Throws
/// std::invalid_argument naming the file that cannot be loaded (missing, unreadable, not
/// PEM, or a key that does not match the certificate).
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const redis_tls& tls);

/// tls_config for one backend: the context from make_tls_context plus the URL's options.
tls_config make_tls_config(const redis_tls& tls);

}  // namespace sluice::redis
