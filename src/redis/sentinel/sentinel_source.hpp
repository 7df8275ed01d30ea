#pragma once
// The address source of redis+sentinel:// and rediss+sentinel:// (address_source.hpp): the
// standalone backend's one connection asks it where the master is each time it connects,
// and it points that connection at a new master when a poll or a failed call finds one. It
// runs on the connection's io_context (no thread of its own) and holds one connection per
// sentinel (AUTH with the URL's sentinel_password, TLS for rediss+sentinel); its questions
// go through their control path (connection::async_control). What to ask whom and when is
// sentinel_address's (sentinel_fsm.hpp: no I/O, unit-tested).
#include <sluice/redis_backend.hpp>
#include <sluice/redis_sentinel.hpp>

#include <chrono>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "redis/address_source.hpp"
#include "redis/tls.hpp"

namespace sluice::redis {

/// Sentinels are polled this often even when all is well, so a failover that leaves the
/// old master reachable (SENTINEL FAILOVER, a network split) is noticed without errors.
inline constexpr std::chrono::milliseconds sentinel_poll_interval{1000};
/// Asking again because calls fail (or the connection reconnects) happens at most this often.
inline constexpr std::chrono::milliseconds sentinel_ask_min_interval{100};

class sentinel_source;

/// The source for `url` on `io` (the timeouts and backoff of `options` for the sentinels'
/// connections; `tls` shared with the master's connection).
std::shared_ptr<sentinel_source> make_sentinel_source(boost::asio::io_context& io,
                                                      const redis_options& options,
                                                      const redis_sentinel_url& url,
                                                      tls_config tls);

/// Waits (up to `within`) for the first round of questions to end, so the first calls find
/// a master. Any thread but the I/O thread.
void wait_for_first_answer(sentinel_source& s, std::chrono::milliseconds within);

/// The source as the connection holds it.
std::shared_ptr<address_source> as_address_source(std::shared_ptr<sentinel_source> s);

}  // namespace sluice::redis
