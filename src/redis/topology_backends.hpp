#pragma once
// The Cluster backend behind make_redis_backend (private: make_redis_backend is the one
// public factory and reads the URL's scheme). It takes options that make_redis_backend has
// checked for its topology, with options.url set to the URL. (A Sentinel deployment is the
// standalone backend with the Sentinel address source: redis_backend.cpp.)
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>

#include <memory>

namespace sluice {

std::shared_ptr<backend> make_redis_cluster_backend(redis_options options);

}  // namespace sluice
