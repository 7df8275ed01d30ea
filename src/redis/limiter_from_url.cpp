// limiter::from_url lives with the Redis backends (sluice::redis): a program that links only
// sluice::core (the memory backend) never pulls in hiredis or OpenSSL.
#include <sluice/backend_url.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <stdexcept>
#include <string>

namespace sluice {

limiter limiter::from_url(std::string_view url) {
  const auto scheme = parse_backend_scheme(url);
  if (!scheme) {
    throw std::invalid_argument(
        "unsupported backend URL (want \"memory\", redis://, rediss://, redis+cluster:// or "
        "redis+sentinel://): " +
        std::string(url));
  }
  if (scheme->kind == backend_kind::memory) return in_memory();
  // make_redis_backend takes every Redis URL (standalone, cluster, sentinel, TLS or not).
  redis_options o;
  o.url = std::string(url);
  return limiter(make_redis_backend(std::move(o)));
}

}  // namespace sluice
