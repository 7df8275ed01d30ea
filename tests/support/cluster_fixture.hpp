#pragma once
/// A real Redis Cluster on loopback for integration tests: `masters` redis-server processes
/// with --cluster-enabled plus `replicas` replicas each, joined by
/// `redis-cli --cluster create`, ready when every node reports cluster_state:ok, agrees on
/// the slot map and every replica's link to its master is up.
///
///   sluice::test::redis_cluster cluster;          // 3 masters + 3 replicas
///   auto b = make_redis_backend(cluster.url());
///   cluster.kill_master_of(slot);                 // a crash; its replica takes over
///
/// Every process is killed when the object is destroyed (RAII, also when a test fails).
/// Not thread-safe: drive it from one thread.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {

struct redis_cluster_options {
  int masters = 3;
  int replicas_per_master = 1;
  /// cluster-node-timeout: how long a node may be unreachable before it is failed over.
  std::chrono::milliseconds node_timeout{1000};
  /// TLS for clients, the cluster bus and replication (`--tls-cluster yes
  /// --tls-replication yes`); each node keeps a plain port for the fixture itself.
  std::optional<redis_tls_files> tls;
};

class redis_cluster {
 public:
  /// Starts and joins the cluster. Throws std::runtime_error (with details) on failure.
  explicit redis_cluster(redis_cluster_options options = {});
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  /// "redis+cluster://127.0.0.1:<p0>,127.0.0.1:<p1>": two seeds, as users would write it;
  /// with TLS "rediss+cluster://" and the TLS ports (no query options).
  std::string url() const;
  std::size_t size() const noexcept { return nodes_.size(); }
  redis_server& node(std::size_t i) { return *nodes_.at(i); }
  std::uint16_t port(std::size_t i) const { return nodes_.at(i)->port(); }
  /// A fresh client to node `i`.
  redis_client client(std::size_t i) const;
  /// The node's cluster id (CLUSTER MYID), cached from start-up.
  const std::string& node_id(std::size_t i) const { return ids_.at(i); }

  /// The index of the node that serves `slot`, as a live node's CLUSTER SLOTS says.
  std::size_t master_of(std::uint16_t slot) const;
  /// The indices of the nodes that serve slots now.
  std::vector<std::size_t> masters() const;
  /// The slot of `key` according to the server (CLUSTER KEYSLOT).
  std::uint16_t server_key_slot(const std::string& key) const;

  /// Kills (SIGKILL) the master of `slot` and returns its index.
  std::size_t kill_master_of(std::uint16_t slot);
  /// Waits until a live node other than `old_master` serves `slot` and every live node
  /// reports cluster_state:ok; returns the new master's index. Throws on timeout.
  std::size_t wait_for_failover(std::uint16_t slot, std::size_t old_master,
                                std::chrono::milliseconds within);

  /// Moves `slot` from its master to node `to` by hand, as `redis-cli --cluster reshard`
  /// does: SETSLOT IMPORTING/MIGRATING, MIGRATE in batches, SETSLOT NODE everywhere.
  /// The three steps are separate so a test can act between them.
  void begin_migration(std::uint16_t slot, std::size_t from, std::size_t to);
  /// MIGRATEs the slot's keys in batches of `batch`, sleeping `pause` after each batch (so
  /// clients meet a half-migrated slot); returns how many moved.
  std::size_t migrate_keys(std::uint16_t slot, std::size_t from, std::size_t to,
                           std::size_t batch = 10,
                           std::chrono::milliseconds pause = std::chrono::milliseconds{0});
  void finish_migration(std::uint16_t slot, std::size_t from, std::size_t to);

  /// Waits until every live node reports cluster_state:ok and the same slot ranges.
  void wait_until_consistent(std::chrono::milliseconds within) const;

 private:
  std::size_t index_of_port(std::uint16_t port) const;
  std::size_t any_live_node() const;

  redis_cluster_options options_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
  std::vector<std::string> ids_;
  std::string log_dir_;
};

}  // namespace sluice::test
