#pragma once
// The Cluster and Sentinel backends behind make_redis_backend (private: make_redis_backend
// is the one public factory and reads the URL's scheme). Each takes options that
// make_redis_backend has checked for its topology, with options.url set to the URL.
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>
#include <sluice/redis_sentinel.hpp>

#include <memory>

namespace sluice {

std::shared_ptr<backend> make_redis_cluster_backend(redis_options options);
std::shared_ptr<backend> make_redis_sentinel_backend(redis_options options);

}  // namespace sluice
