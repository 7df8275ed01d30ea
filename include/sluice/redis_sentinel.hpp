#pragma once
/// The URL of a Redis Sentinel deployment, as make_redis_backend (sluice/redis_backend.hpp)
/// takes it.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sluice/redis_backend.hpp>

namespace sluice {

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

}  // namespace sluice
