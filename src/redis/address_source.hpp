#pragma once
// Where a connection connects (redis-plus-plus's topology as a strategy: Sentinel is an
// address source for a connection). The connection (connection.hpp) asks its source for an
// address each time it (re)connects, tells it when a call failed in a way a moved server
// explains, and is told when the source learns on its own that the server moved. A plain
// redis:// URL is a fixed host:port (fixed_address); redis+sentinel:// is the Sentinel
// resolver (sentinel/sentinel_source.hpp). Everything runs on the connection's I/O thread:
// a source adds no thread, and a source with I/O (the sentinels) uses the same io_context.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace sluice::redis {

struct server_address {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const server_address&) const = default;
};

class address_source {
 public:
  /// The address to connect to; none when the source knows none (the connection then counts
  /// a failed attempt and retries after its backoff).
  using resolve_handler = std::function<void(std::optional<server_address>)>;
  /// The server moved to this address (the connection is pointed there: connection::retarget).
  using moved_handler = std::function<void(const server_address&)>;

  virtual ~address_source() = default;

  /// I/O thread, once, before the first resolve(): background work (a poll) starts; `moved`
  /// runs on the I/O thread, never inline.
  virtual void start(moved_handler moved) = 0;
  /// I/O thread: the address for a connection attempt. `done` runs exactly once, on the I/O
  /// thread, inline when the answer is known at once.
  virtual void resolve(resolve_handler done) = 0;
  /// I/O thread: a call failed in a way a moved server explains (READONLY, a timeout).
  virtual void suspect() {}
  /// I/O thread: the connection went down (an attempt failed, or it was lost), or is up. A
  /// Sentinel's source asks again, at most every 100 ms, for as long as it is down: the
  /// connection's own retries back off to a second, a failover should not wait for them.
  virtual void link_down() {}
  virtual void link_up() {}
  /// I/O thread: the connection was pointed at `a` from outside (connection::retarget). A
  /// fixed address answers `a` from now on; a source that finds addresses itself ignores it.
  virtual void pointed_at(const server_address& a) { static_cast<void>(a); }
  /// I/O thread: for good; a pending resolve() gets no address.
  virtual void stop() {}
  /// Times the server moved after the first address (a Sentinel failover). Any thread.
  virtual std::uint64_t moves() const noexcept { return 0; }
};

/// Always `a` (or where connection::retarget pointed it since): the source of a redis:// URL
/// (and of each sentinel's and cluster node's connection).
std::shared_ptr<address_source> fixed_address(server_address a);

}  // namespace sluice::redis
