#pragma once
/// The Redis backends (one server, Redis Cluster, Redis Sentinel; TLS or not) and their one
/// factory, make_redis_backend: each decision is one atomic Lua script run inside Redis.
/// Part of the sluice::redis component (as limiter_from_url, declared here).
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <sluice/backend.hpp>
#include <sluice/limiter.hpp>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace sluice {

/// TLS settings of a URL: the `rediss` schemes and their query options
/// `?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=yes|no` (values percent-decoded).
struct redis_tls {
  bool enabled = false;   ///< a rediss:// (or rediss+...) URL
  std::string ca_file;    ///< ca=: PEM CA certificates to verify the server; empty: the system's
  std::string cert_file;  ///< cert=: PEM client certificate (chain); always with key_file
  std::string key_file;   ///< key=: PEM private key of cert_file (unencrypted)
  /// sni=: the name sent in SNI and checked against the server's certificate; empty: the
  /// host of the URL (an IP address is checked against the certificate's IP entries).
  std::string sni;
  /// verify=no: accept any server certificate (encryption without authentication; for tests).
  bool verify = true;
};

/// A parsed `redis://[[user]:password@]host[:port][/db]` or
/// `rediss://[[user]:password@]host[:port][/db][?ca=FILE&cert=FILE&key=FILE&sni=NAME&verify=yes|no]`
/// URL.
struct redis_url {
  std::string user;      ///< ACL user; empty for the default user
  std::string password;  ///< empty: no AUTH
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  int db = 0;
  redis_tls tls;  ///< enabled for rediss://
};

/// Parses a redis:// or rediss:// URL; std::nullopt (and `why` set) when it is malformed.
/// Query options are TLS options, so they are refused in a redis:// URL. Files are not
/// opened here: make_redis_backend loads them.
std::optional<redis_url> parse_redis_url(std::string_view url, std::string* why = nullptr);

/// One `host:port` of a cluster seed list or a sentinel list.
struct redis_endpoint {
  std::string host;
  std::uint16_t port = 0;
};

/// True when `url` is a well-formed redis://, redis+cluster:// or redis+sentinel:// URL, or
/// one of their TLS forms rediss://, rediss+cluster://, rediss+sentinel:// (any URL
/// make_redis_backend accepts); otherwise false with `why` set. TLS files are not opened.
bool validate_redis_url(std::string_view url, std::string* why = nullptr);

/// How make_redis_backend builds a backend, whatever the URL's scheme. An option that only
/// one topology takes says so; set on another, make_redis_backend refuses it.
struct redis_options {
  /// The URL the deprecated make_redis_backend(options) reads; make_redis_backend(url,
  /// options) ignores it.
  std::string url = "redis://127.0.0.1:6379";
  std::string key_prefix = "sluice:";  ///< prepended to every key
  /// Per connection attempt: TCP connect plus the handshake (AUTH, SELECT, SCRIPT LOAD,
  /// PING). A server that accepts but does not answer fails the attempt.
  std::chrono::milliseconds connect_timeout{250};
  /// Per decision, from the call to its completion, queueing included. A connection whose
  /// oldest request gets no reply in this time is considered stuck and is reconnected.
  /// A decision that meets NOSCRIPT is re-sent as EVAL within the same timeout.
  std::chrono::milliseconds command_timeout{50};
  std::size_t max_in_flight = 65536;  ///< more waiting calls fail fast
  /// Single-key decisions (decide, async_decide) that arrive while Redis is busy are
  /// coalesced into one script call of at most this many, each decided exactly as alone
  /// (lua/decide_batch.lua); a lone decision is never held back; 1: each its own call.
  /// 1..1000 (the script puts a call's keys on Lua's stack: a few thousand values). On a
  /// Cluster a call holds only decisions whose keys share a hash slot (a hash tag).
  std::size_t max_batch = 32;
  /// After its last piece of work the I/O thread keeps polling this long (yielding the core
  /// in between) before it sleeps in epoll_wait, so a reply or a new check that comes soon
  /// after is handled without a thread wake-up (10-20 us on a VM, a third of a loopback
  /// round trip). Costs up to this much CPU after each burst of work; 0: sleep at once.
  /// Only while at most two calls are outstanding: under more load the thread sleeps at
  /// once, leaving the core to the callers. Unset: 50 us. Standalone Redis and Sentinel's
  /// master only (a redis+cluster:// URL refuses it when set).
  std::optional<std::chrono::microseconds> poll_before_sleep;
  /// Runs the backend's connection, timers and batching on this io_context instead of an
  /// I/O thread of the backend's own: a program whose checks come from one event-loop
  /// thread (an HTTP server's) then pays no thread hand-off and no wake-up per check, and
  /// async_decide's handler runs on that thread. Conditions: one thread at a time runs it
  /// (no concurrent run() threads: the connection has no strand), it outlives the backend,
  /// and it keeps running while the backend is used and until the checks pending when the
  /// backend is destroyed have completed (with backend_shutting_down, on the loop). The
  /// connection always has a read or a timer pending, so run() does not return by itself.
  /// A blocking decide() made inside that io_context's run() returns backend_unavailable at
  /// once instead of waiting for itself (outside run() it would wait for its timeout: do not
  /// call it there). Checks from other threads still work. poll_before_sleep does not apply.
  /// nullptr (the default): the backend starts its own I/O thread. Standalone Redis only
  /// (redis+cluster:// and redis+sentinel:// URLs refuse it).
  boost::asio::io_context* run_on = nullptr;
  /// Reconnect delays: the first retry after losing a connection is immediate, then
  /// backoff_min doubling up to backoff_max, each with jitter (a random 50..100%).
  std::chrono::milliseconds reconnect_backoff_min{25};
  std::chrono::milliseconds reconnect_backoff_max{1000};
};

/// Creates the backend that `url` names, the one factory for every Redis scheme:
///   - `redis://`, `rediss://` (parse_redis_url): one server;
///   - `redis+cluster://`, `rediss+cluster://` (sluice/redis_cluster.hpp): a Redis Cluster,
///     each key routed to the node that owns its slot. The whole prefixed key picks the
///     slot, so a `{hash tag}` in a key keeps related keys on one node. MOVED refreshes the
///     slot map and retries on the new owner, ASK retries once on the importing node after
///     ASKING, NOSCRIPT re-sends the script as EVAL on that node, and connection failures
///     refresh the map so a promoted replica takes over: at most a few redirections per
///     call, every call completes within `command_timeout` (plus scheduling);
///   - `redis+sentinel://`, `rediss+sentinel://` (sluice/redis_sentinel.hpp): asks Redis
///     Sentinel where the named master is, serves from it, and asks again when the
///     connection fails or the node stops being a master (a failover); calls during the
///     switch fail with backend errors.
/// `options` mean the same for every scheme; an option that one topology alone takes
/// (run_on, poll_before_sleep) is refused on the others.
///
/// Starts the backend's I/O thread (unless `run_on`); connecting happens in the background
/// (and again after any failure), so this does not block. Throws std::invalid_argument for a
/// malformed or unknown URL, an option out of range or not taken by the URL's topology (the
/// message names it), and for a TLS URL whose CA, certificate or key file cannot be loaded
/// (the message names the file).
///
/// With TLS, every connection (and every reconnection) runs a TLS handshake within
/// `connect_timeout` before AUTH/SELECT; a failed handshake (an unknown CA, a name that
/// does not match, a refused client certificate) fails the attempt like a refused
/// connection: calls report backend_unavailable and the backend keeps retrying.
///
/// Errors its decide()/async_decide() report (sluice::errc): backend_unavailable (not
/// connected: refused, lost, or reconnecting; reported at once, without waiting),
/// backend_timeout, backend_overloaded (max_in_flight reached), backend_script_error,
/// backend_protocol_error, backend_shutting_down (the backend is being destroyed).
/// async_decide's handler runs on the backend's I/O thread (with run_on: on that io_context),
/// or inline when the call is refused at once. Destroying the backend completes every pending
/// call with backend_shutting_down and joins the thread; with run_on it does not wait: those
/// calls complete afterwards, when the io_context runs them.
std::shared_ptr<backend> make_redis_backend(std::string_view url, redis_options options = {});

/// make_redis_backend(options.url, options).
[[deprecated("use make_redis_backend(url, options)")]] inline std::shared_ptr<backend>
make_redis_backend(redis_options options) {
  const std::string url = options.url;
  return make_redis_backend(url, std::move(options));
}

/// A limiter for `url`: "memory" (limiter::in_memory()) or any URL make_redis_backend
/// takes, built with `options`. Throws std::invalid_argument for anything else, as
/// make_redis_backend does. In the sluice::redis component: a program that links only
/// sluice::core has limiter::in_memory() and the limiter's constructor.
limiter limiter_from_url(std::string_view url, redis_options options = {});

}  // namespace sluice
