#pragma once
/// The URL of a Redis Cluster, as make_redis_backend (sluice/redis_backend.hpp) takes it.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/redis_backend.hpp>

namespace sluice {

/// A parsed `redis+cluster://[[user]:password@]host:port[,host:port...]` URL, or
/// `rediss+cluster://...` with the TLS query options of rediss:// (TLS to every node). The
/// nodes are seeds: any reachable one tells the client the whole cluster's layout.
struct redis_cluster_url {
  std::string user;                   ///< ACL user on every node; empty for the default user
  std::string password;               ///< empty: no AUTH
  std::vector<redis_endpoint> seeds;  ///< at least one; a missing port is 6379
  redis_tls tls;                      ///< enabled for rediss+cluster://
};

/// Parses a redis+cluster:// URL; std::nullopt (and `why` set) when it is malformed.
/// A cluster has no databases, so a "/db" suffix is refused.
std::optional<redis_cluster_url> parse_redis_cluster_url(std::string_view url,
                                                         std::string* why = nullptr);

}  // namespace sluice
