// PLACEHOLDER while the Redis client is written (being replaced in this same change).
#include <sluice/redis_backend.hpp>
#include <stdexcept>
namespace sluice {
std::optional<redis_url> parse_redis_url(std::string_view, std::string* why) {
  if (why) *why = "not implemented";
  return std::nullopt;
}
std::shared_ptr<backend> make_redis_backend(redis_options) {
  throw std::invalid_argument("redis backend not implemented yet");
}
}  // namespace sluice
