#pragma once
// Routing token-bucket decisions over a Redis Cluster: a map of per-node connections
// (redis::connection, one auto-pipelined connection per node) plus the slot map.
//
// A decision goes to the master of its key's slot, through that node's decision_batcher, the
// node's one queue of script calls: single-key decisions on one slot (hash-tagged keys) that
// arrive while the node is busy share one script call, as on a standalone Redis, and every
// other script call (multi-key, refunds, the redirections followed) is a request of the same
// queue, admitted once. CLUSTER SLOTS is control traffic (connection::async_control). Redirections
// are followed inside the client, as redis-plus-plus does: MOVED refreshes the map and retries on
// the new owner, ASK retries on the importing node with ASKING sent just before (one request on
// that connection, so nothing slips in between), NOSCRIPT re-sends the script as EVAL
// (script_exec.hpp, under the same ASKING). Any I/O error, timeout or CLUSTERDOWN also refreshes
// the map, which is how a promoted replica takes over after a master fails. Attempts are bounded
// (max_redirects) and every decision completes by its deadline (command_timeout from the call):
// every attempt carries it to its connection, which fails the request there.
//
// What to do with a reply (decode, follow, fail, refresh) and when to fetch the slot map
// again are cluster_fsm.hpp's (no I/O, unit-tested); this class does the I/O around them.
//
// Thread-safety: submit() from any thread; everything else runs on the io_context's
// single thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <sluice/backend.hpp>
#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>

#include "algorithm/limit.hpp"
#include "redis/cluster/cluster_fsm.hpp"
#include "redis/cluster/slot_map.hpp"
#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/decision_batcher.hpp"
#include "redis/engine/script_exec.hpp"
#include "redis/handshake.hpp"
#include "redis/script_request.hpp"

namespace sluice::redis::cluster {

/// Counts for tests and metrics. Monotonic.
struct cluster_stats {
  std::uint64_t moved = 0;
  std::uint64_t ask = 0;
  std::uint64_t noscript = 0;
  std::uint64_t other_script_calls = 0;  ///< every other script call of the nodes' queues
  std::uint64_t refreshes = 0;           ///< slot maps received
  std::uint64_t refresh_failures = 0;    ///< refresh rounds where no node answered
  /// Multi-key decisions whose keys were on several slots (decided slot by slot).
  std::uint64_t cross_slot = 0;
  std::uint64_t refunds = 0;          ///< refund scripts sent for slot groups spent in vain
  std::uint64_t refund_failures = 0;  ///< of those, failed: their tokens stay spent
  /// Single-key decisions' script calls through the nodes' batchers, and the decisions
  /// they carried (a batch of same-slot decisions is one call).
  std::uint64_t script_calls = 0;
  std::uint64_t batched_decisions = 0;
};

/// What a multi-key script call does with its keys (all in one slot).
enum class multi_kind : std::uint8_t {
  decide,  ///< lua/decide_multi.lua: all or nothing
  refund,  ///< lua/refund.lua: give `params.cost_ut` back to each key
};

class cluster_client : public std::enable_shared_from_this<cluster_client> {
 public:
  /// `tls` (from url.tls, loaded by the caller) is used for every node.
  cluster_client(boost::asio::io_context& io, const redis_options& options,
                 const redis_cluster_url& url, tls_config tls);
  cluster_client(const cluster_client&) = delete;
  cluster_client& operator=(const cluster_client&) = delete;

  /// Connects to the seeds and fetches the slot map, in the background. Call once.
  void start();
  /// Stops every connection and timer; pending decisions complete with
  /// backend_shutting_down. Thread-safe, idempotent.
  void stop();

  /// Decides on the node owning `full_key` (the prefixed key). `handler` runs once, on the
  /// I/O thread, or inline when refused at once. Thread-safe.
  void submit(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
              decide_handler handler);

  /// Runs the multi-key or refund script for `full_keys` (prefixed keys that must share
  /// one slot, with one `params` and `capacities` entry each) on the slot's owner, with the
  /// same routing and bounds as submit(). `handler` runs once, on the I/O thread or inline;
  /// a refund completes with no decisions. Thread-safe.
  void submit_multi(multi_kind kind, std::vector<std::string> full_keys,
                    std::vector<detail::limit_params> params, std::vector<std::uint64_t> capacities,
                    decide_all_handler handler);

  /// Runs any other script call (a lease, a slot step alone; its keys on one slot) on the owner
  /// of its first key's slot, with the same routing and bounds as submit(). `handler` runs
  /// once, on the I/O thread or inline, with the undecoded reply. Thread-safe.
  void submit_script(script_request request, reply_handler handler);

  /// Runs the slot step `request` (validated; its id borrowed for the call) on the owner of
  /// `full_key`'s slot, batched there with the steps waiting on that slot
  /// (decision_batcher::submit_slot), with the same routing and bounds as submit(); a
  /// redirection sends each step of the call on alone. `handler` runs once, on the I/O
  /// thread or inline. Thread-safe.
  void submit_slot(std::string full_key, const slot_request& request, slot_handler handler);

  /// Counts a multi-key decision that spanned several slots (stats().cross_slot).
  void note_cross_slot() noexcept { cross_slot_.fetch_add(1, std::memory_order_relaxed); }

  cluster_stats stats() const;

 private:
  using clock = std::chrono::steady_clock;
  struct op;
  struct attempt;
  // One node: its connection, and its one queue of script calls (single-key decisions,
  // batched, and every other script call: multi-key, refunds, redirections followed).
  struct node_link {
    std::shared_ptr<connection> conn;
    std::shared_ptr<decision_batcher> batcher;
  };
  // What a submission needs, swapped as a whole when the map changes.
  struct routing {
    std::shared_ptr<const slot_map> map;  // null until the first CLUSTER SLOTS answer
    std::vector<node_link> owners;        // aligned with map->ranges()
  };

  // The node's link, made and started on first use; empty once stopped.
  node_link link_for(const node_address& node);
  // The batcher of the master that owns `full_key`'s slot by the current map; null with no
  // map yet, or no master for the slot (the call is then routed by route()).
  std::shared_ptr<decision_batcher> owner_of(std::string_view full_key) const;
  // A decision the batcher of `node` handed back with `reply` (a redirection): followed on
  // its own from here.
  void follow(const node_address& node, std::string full_key, const detail::limit_params& params,
              std::uint64_t limit, clock::time_point deadline, decide_handler handler,
              const reply_ptr& reply);
  // A slot step the batcher of `node` handed back with `reply`: followed alone from here.
  void follow_slot(const node_address& node, std::string full_key, const slot_request& request,
                   clock::time_point deadline, slot_handler handler, const reply_ptr& reply);
  // One attempt of `o` through `queue`, the node's one queue of script calls.
  void send(const std::shared_ptr<op>& o, const node_address& node,
            const std::shared_ptr<decision_batcher>& queue, bool asking);
  void on_reply(const std::shared_ptr<op>& o, const node_address& node, std::error_code ec,
                reply_ptr reply);
  // Does what op_fsm said, short of decoding a reply: counts, refreshes, retries, fails.
  void apply(const std::shared_ptr<op>& o, op_step s);
  void route(const std::shared_ptr<op>& o);
  void finish(const std::shared_ptr<op>& o, std::error_code ec, const decision& d = {});
  void finish_all(const std::shared_ptr<op>& o, std::error_code ec, std::vector<decision> ds);

  void request_refresh();
  void start_refresh();
  // Does what refresh_fsm said: nothing, a wake-up, or a round.
  void run_refresh(refresh_fsm::step next);
  void refresh_from(std::shared_ptr<std::vector<node_address>> candidates, std::size_t i);
  void refresh_done(bool ok);
  void install(slot_map map);

  boost::asio::io_context& io_;
  const redis_options options_;
  const redis_cluster_url url_;
  const tls_config tls_;
  const handshake handshake_;  // every node's

  mutable std::mutex mu_;  // guards routing_, nodes_, stopped_
  std::shared_ptr<const routing> routing_;
  std::map<node_address, node_link> nodes_;
  bool stopped_ = false;
  std::atomic<std::size_t> next_seed_{0};

  // Refresh state: I/O thread only, except refresh_wanted_ (any thread).
  std::atomic<bool> refresh_wanted_{false};
  refresh_fsm refresh_;
  boost::asio::steady_timer refresh_timer_;

  std::atomic<std::uint64_t> moved_{0}, ask_{0}, refreshes_{0}, refresh_failures_{0},
      cross_slot_{0}, refunds_{0}, refund_failures_{0};
};

}  // namespace sluice::redis::cluster
