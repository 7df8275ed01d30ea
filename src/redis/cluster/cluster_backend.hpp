#pragma once
// The cluster backend's private face: its routing counters, for tests and metrics
// (dynamic_cast a backend from make_redis_cluster_backend to this).
#include <sluice/backend.hpp>

#include "redis/cluster/cluster_client.hpp"

namespace sluice::redis::cluster {

class cluster_backend_base : public backend {
 public:
  /// MOVED/ASK/NOSCRIPT seen and slot maps fetched so far.
  virtual cluster_stats stats() const noexcept = 0;
};

}  // namespace sluice::redis::cluster
