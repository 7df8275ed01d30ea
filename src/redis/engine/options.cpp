#include "redis/engine/options.hpp"

#include <stdexcept>
#include <string>

namespace sluice::redis {

void validate_options(const redis_options& o, topology t) {
  if (o.connect_timeout.count() <= 0 || o.command_timeout.count() <= 0)
    throw std::invalid_argument("Redis connect and command timeouts must be positive");
  if (o.run_on && t != topology::standalone) {
    throw std::invalid_argument(
        std::string("redis_options::run_on is for standalone Redis only, not ") +
        (t == topology::cluster ? "Cluster" : "Sentinel"));
  }
  if (o.poll_before_sleep && t == topology::cluster) {
    throw std::invalid_argument(
        "redis_options::poll_before_sleep is for standalone Redis and Sentinel only, not "
        "Cluster");
  }
  if (o.poll_before_sleep && o.poll_before_sleep->count() < 0)
    throw std::invalid_argument("poll_before_sleep must not be negative");
  if (o.max_in_flight == 0) throw std::invalid_argument("max_in_flight must be positive");
  // lua/decide_batch.lua unpacks a call's keys onto Lua's stack (at most ~8000 values).
  if (o.max_batch == 0 || o.max_batch > 1000)
    throw std::invalid_argument("max_batch must be 1..1000");
  if (o.reconnect_backoff_min.count() <= 0 || o.reconnect_backoff_max < o.reconnect_backoff_min)
    throw std::invalid_argument("reconnect backoff must satisfy 0 < min <= max");
}

}  // namespace sluice::redis
