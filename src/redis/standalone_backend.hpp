#pragma once
// The standalone Redis backend behind make_redis_backend, for the Sentinel backend, which
// builds one from the first master's address (not a URL string) and points it at each
// master it is told about after that.
#include <sluice/backend.hpp>
#include <sluice/redis_backend.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "redis/tls.hpp"

namespace sluice::redis {

/// The standalone backend, as the Sentinel backend holds it: Sentinel is an address source,
/// so on a failover the one connection is pointed at the new master; nothing is rebuilt.
class standalone_backend : public backend {
 public:
  /// Points the backend's connection at `host`:`port` (connection::retarget). Thread-safe.
  virtual void retarget(std::string host, std::uint16_t port) = 0;
};

/// A backend on `url` (url.tls is ignored: `tls` is used). `options` must be valid (as
/// make_redis_backend checks); only options.url is not read.
std::shared_ptr<standalone_backend> make_standalone_backend(const redis_options& options,
                                                            const redis_url& url, tls_config tls);

}  // namespace sluice::redis
