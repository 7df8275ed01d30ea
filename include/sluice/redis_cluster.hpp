#pragma once
/// Redis Cluster and Redis Sentinel backends: the same atomic Lua decision as the
/// standalone Redis backend, routed to the node that owns the key.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/backend.hpp>
#include <sluice/redis_backend.hpp>

namespace sluice {

/// One `host:port` of a cluster seed list or a sentinel list.
struct redis_endpoint {
  std::string host;
  std::uint16_t port = 0;
};

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

/// A parsed
/// `redis+sentinel://[[user]:password@]host:port[,host:port...]/MASTER_NAME[/db][?OPTIONS]`.
/// OPTIONS: `sentinel_password=PW` (and `sentinel_user=NAME`, which needs it): AUTH for the
/// sentinels, which have their own `requirepass`; the user info stays the master's.
/// `rediss+sentinel://` also takes the TLS options of rediss:// and uses TLS to the
/// sentinels and to the master.
struct redis_sentinel_url {
  std::string user;                       ///< ACL user of the master (not of the sentinels)
  std::string password;                   ///< password of the master
  std::vector<redis_endpoint> sentinels;  ///< at least one; a missing port is 26379
  std::string master_name;                ///< as in `sentinel monitor <name> ...`
  int db = 0;
  std::string sentinel_user;      ///< sentinel_user=: ACL user on the sentinels
  std::string sentinel_password;  ///< sentinel_password=: empty: sentinels asked without AUTH
  redis_tls tls;                  ///< enabled for rediss+sentinel://
};

/// Parses a redis+sentinel:// URL; std::nullopt (and `why` set) when it is malformed.
std::optional<redis_sentinel_url> parse_redis_sentinel_url(std::string_view url,
                                                           std::string* why = nullptr);

/// True when `url` is a well-formed redis://, redis+cluster:// or redis+sentinel:// URL, or
/// one of their TLS forms rediss://, rediss+cluster://, rediss+sentinel:// (any URL
/// make_redis_backend accepts); otherwise false with `why` set. TLS files are not opened.
bool validate_redis_url(std::string_view url, std::string* why = nullptr);

/// Creates a Redis Cluster backend for `options.url` (redis+cluster://...); `key_prefix`,
/// timeouts and limits mean what they mean for make_redis_backend. The whole prefixed key
/// picks the slot, so a `{hash tag}` in a key keeps related keys on one node.
///
/// Routing follows the cluster: MOVED refreshes the slot map and retries on the new owner,
/// ASK retries once on the importing node after ASKING, NOSCRIPT re-sends the script as
/// EVAL on that node, and connection failures refresh the map so a promoted replica takes
/// over. At most a few redirections per call, and every call completes within
/// `command_timeout` (plus the I/O thread's scheduling) with a decision or a sluice::errc
/// backend error (the limiter then applies the policy's failure mode).
///
/// Connecting happens in the background; this does not block. Throws
/// std::invalid_argument for a malformed URL or TLS files that cannot be loaded.
/// Thread-safety and handler rules are those of make_redis_backend.
std::shared_ptr<backend> make_redis_cluster_backend(redis_options options);

/// Creates a backend that asks Redis Sentinel where the master named in `options.url`
/// (redis+sentinel://...) is, serves from it, and asks again when the connection fails
/// or the node stops being a master (a failover); calls during the switch fail with
/// backend errors. Throws std::invalid_argument for a malformed URL or TLS files that
/// cannot be loaded.
std::shared_ptr<backend> make_redis_sentinel_backend(redis_options options);

}  // namespace sluice
