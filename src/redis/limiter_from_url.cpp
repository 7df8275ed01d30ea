// limiter_from_url lives with the Redis backends (sluice::redis), and is declared with them
// (sluice/redis_backend.hpp): a program that links only sluice::core (the memory backend)
// never pulls in hiredis or OpenSSL, and cannot name it.
#include <sluice/backend_url.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <stdexcept>
#include <string>
#include <utility>

namespace sluice {

limiter limiter_from_url(std::string_view url, redis_options options) {
  const auto scheme = parse_backend_scheme(url);
  if (!scheme) {
    const auto sep = url.find("://");
    throw std::invalid_argument(
        "unsupported backend URL (want \"memory\", redis://, rediss://, redis+cluster:// or "
        "redis+sentinel://): " +
        (sep == std::string_view::npos ? std::string(url).substr(0, 64)
                                       : "scheme " + std::string(url.substr(0, sep))));
  }
  if (scheme->kind == backend_kind::memory) return limiter::in_memory();
  return limiter(make_redis_backend(url, std::move(options)));
}

}  // namespace sluice
