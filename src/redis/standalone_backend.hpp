#pragma once
// The standalone Redis backend behind make_redis_backend, for the Sentinel backend, which
// builds one per master it is told about from an address (not a URL string) and shares
// its TLS context between them.
#include <sluice/backend.hpp>
#include <sluice/redis_backend.hpp>

#include <memory>

#include "redis/tls.hpp"

namespace sluice::redis {

/// A backend on `url` (url.tls is ignored: `tls` is used). `options` must be valid (as
/// make_redis_backend checks); only options.url is not read.
std::shared_ptr<backend> make_standalone_backend(const redis_options& options, const redis_url& url,
                                                 tls_config tls);

}  // namespace sluice::redis
