#pragma once
/// A blocking hiredis connection for setting up and inspecting Redis in tests (SCRIPT FLUSH,
/// GET, PTTL, replaying the token-bucket script with a given "now"). Not the product's
/// client, and not thread-safe: one per thread.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "algorithm/limit.hpp"
#include "redis/resp.hpp"

namespace sluice::test {

class redis_client {
 public:
  /// Connects to 127.0.0.1:`port`; `timeout` bounds the connect and every command. With a
  /// `password`, sends AUTH first. Throws std::runtime_error when it cannot connect or
  /// AUTH is refused.
  explicit redis_client(std::uint16_t port,
                        std::chrono::milliseconds timeout = std::chrono::seconds{2},
                        const std::string& password = {});

  /// Runs one command and returns its reply (error replies included). Throws
  /// std::runtime_error on an I/O error or timeout (the connection is then unusable).
  redis::reply_ptr command(const std::vector<std::string>& args);
  redis::reply_ptr command(std::initializer_list<std::string_view> args);

  /// Sends `count` commands, already formatted with redis::append_command (or the
  /// product's formatters), inside MULTI/EXEC and returns EXEC's reply: an array with one
  /// reply per command, run with nothing in between. Throws std::runtime_error.
  redis::reply_ptr transaction(const std::string& formatted, std::size_t count);

  /// GET; std::nullopt for a missing key.
  std::optional<std::string> get(std::string_view key);
  /// PTTL in ms (-2: no key, -1: no expiry).
  std::int64_t pttl(std::string_view key);
  /// SCRIPT FLUSH: the next EVALSHA meets NOSCRIPT.
  void script_flush();
  /// FLUSHALL.
  void flush_all();

  /// EVAL of lua/decide.lua on `key` with `now_ms` as the script's test-only clock,
  /// returned as the outcome it encodes. Throws std::runtime_error on an error or malformed
  /// reply.
  detail::limit_outcome eval_decide(std::string_view key, const detail::limit_params& p,
                                    std::int64_t now_ms);

 private:
  struct context_deleter {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
  };
  std::unique_ptr<redisContext, context_deleter> ctx_;
};

}  // namespace sluice::test
