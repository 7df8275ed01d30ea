#pragma once
/// The Redis backend: each decision is one atomic Lua script run inside Redis.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sluice/backend.hpp>

namespace sluice {

/// A parsed `redis://[[user]:password@]host[:port][/db]` URL.
struct redis_url {
  std::string user;      ///< ACL user; empty for the default user
  std::string password;  ///< empty: no AUTH
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  int db = 0;
};

/// Parses a redis:// URL; std::nullopt (and `why` set) when it is malformed.
std::optional<redis_url> parse_redis_url(std::string_view url, std::string* why = nullptr);

struct redis_options {
  std::string url = "redis://127.0.0.1:6379";
  std::string key_prefix = "sluice:";                ///< prepended to every key
  std::chrono::milliseconds connect_timeout{250};    ///< per connection attempt
  std::chrono::milliseconds command_timeout{50};     ///< per decision, queueing included
  std::size_t max_in_flight = 65536;                 ///< more waiting calls fail fast
};

/// Creates the backend and starts its I/O thread; connecting happens in the background
/// (and again after any failure), so this does not block. Throws std::invalid_argument
/// for a malformed URL.
std::shared_ptr<backend> make_redis_backend(redis_options options);

}  // namespace sluice
