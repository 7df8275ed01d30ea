#pragma once
/// A real Redis Sentinel setup on loopback for integration tests: one master, one replica
/// and three redis-sentinel processes monitoring them as "mymaster" (quorum 2,
/// down-after-milliseconds 1000). Ready when every sentinel knows the replica and the
/// other sentinels, so a failover can happen.
///
///   sluice::test::redis_sentinel_group group;
///   auto b = make_redis_backend(group.url());
///   group.failover();  // SENTINEL FAILOVER: the replica becomes master
///
/// Every process is killed when the object is destroyed (RAII). Not thread-safe.
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {

/// Passwords of a sentinel group; empty: none.
struct sentinel_group_options {
  /// `requirepass` of every sentinel (and `sentinel sentinel-pass`, so they reach each
  /// other): clients must AUTH with it.
  std::string sentinel_password;
  /// `requirepass` / `masterauth` of the data nodes (and `sentinel auth-pass`).
  std::string master_password;
  /// TLS everywhere (`tls-port`, `tls-replication yes` on data nodes and sentinels); every
  /// process keeps a plain port for the fixture's own client.
  std::optional<redis_tls_files> tls;
};

/// One redis-sentinel process with its own config file (sentinels rewrite it).
class sentinel_process {
 public:
  /// Starts monitoring `master_port` on 127.0.0.1 as `name`; waits for PING. Throws.
  sentinel_process(const std::string& dir, const std::string& name, std::uint16_t master_port,
                   sentinel_group_options options = {});
  ~sentinel_process();
  sentinel_process(const sentinel_process&) = delete;
  sentinel_process& operator=(const sentinel_process&) = delete;
  std::uint16_t port() const noexcept { return port_; }
  /// The TLS port (0 without TLS).
  std::uint16_t tls_port() const noexcept { return tls_port_; }

 private:
  bool spawn_and_wait(std::string& why);
  void kill();
  std::string dir_, name_;
  std::uint16_t master_port_;
  sentinel_group_options options_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
};

class redis_sentinel_group {
 public:
  static constexpr const char* master_name = "mymaster";

  explicit redis_sentinel_group(int sentinels = 3, sentinel_group_options options = {});
  ~redis_sentinel_group();
  redis_sentinel_group(const redis_sentinel_group&) = delete;
  redis_sentinel_group& operator=(const redis_sentinel_group&) = delete;

  /// "redis+sentinel://127.0.0.1:<s0>,127.0.0.1:<s1>,.../mymaster", with the master
  /// password as user info and `?sentinel_password=` when the options set them.
  std::string url() const;
  /// "127.0.0.1:<s0>,127.0.0.1:<s1>,...": for URLs written by the test (TLS ports with TLS).
  std::string hosts() const;
  /// The two data nodes: [0] starts as master, [1] as its replica.
  redis_server& data_node(std::size_t i) { return *data_.at(i); }
  std::uint16_t sentinel_port(std::size_t i) const { return sentinels_.at(i)->port(); }

  /// The master's port as the first answering sentinel reports it (with TLS: the TLS port).
  std::uint16_t master_port() const;
  /// SENTINEL FAILOVER on a sentinel: the replica is promoted, the master demoted.
  void failover();
  /// Waits until every sentinel reports a master other than `old_port`, and that node
  /// says role:master (groups without TLS). Returns its port. Throws on timeout.
  std::uint16_t wait_for_new_master(std::uint16_t old_port, std::chrono::milliseconds within);

 private:
  std::string dir_;
  sentinel_group_options options_;
  std::vector<std::unique_ptr<redis_server>> data_;
  std::vector<std::unique_ptr<sentinel_process>> sentinels_;
};

}  // namespace sluice::test
