#pragma once
// The Cluster client's protocol decisions without any I/O (Boost.Redis's exec_fsm shape):
// what an op does after a reply (decode it, follow a redirection, fail, and whether the slot
// map may be stale), and when the slot map is fetched again. cluster_client.cpp feeds them
// replies and the time and does what they say; tests/unit/cluster_fsm_test.cpp drives them
// with canned replies and a time that moves only when told. No socket, no clock, no lock.
#include <chrono>
#include <cstdint>
#include <optional>
#include <system_error>

#include "redis/cluster/slot_map.hpp"
#include "redis/resp.hpp"

namespace sluice::redis::cluster {

/// Redirections (MOVED, ASK) one decision may follow.
inline constexpr int max_redirects = 5;
/// Slot-map refreshes are at least this far apart, however many calls ask for one.
inline constexpr std::chrono::milliseconds refresh_min_interval{100};
/// While refreshes fail, they are retried with this backoff (doubling up to the max).
inline constexpr std::chrono::milliseconds refresh_retry_max{1000};

/// What an op does next.
struct op_step {
  enum class kind : std::uint8_t {
    decode,  ///< a reply for the caller's decoder (a result, or a script error)
    retry,   ///< send again, to `target` (with ASKING before it when `asking`)
    fail,    ///< complete with `ec`
  };
  kind what = kind::decode;
  node_address target;
  bool asking = false;
  std::error_code ec;
  /// The slot map may be stale (MOVED, a node down, the cluster reconfiguring): refresh it.
  bool refresh = false;
  /// What to count (cluster_stats::moved / ask).
  bool moved = false;
  bool ask = false;
};

/// One op's redirections, deadline and replies. Copyable state, pure transitions.
class op_fsm {
 public:
  using clock = std::chrono::steady_clock;
  explicit op_fsm(clock::time_point deadline) noexcept : deadline_(deadline) {}

  /// The attempt on `node` completed with `ec` (from the connection or the queue) or
  /// `reply` (when !ec), at `now`.
  op_step on_reply(std::error_code ec, const redisReply* reply, const node_address& node,
                   clock::time_point now);
  /// A node's batcher handed back a decision of a call answered with `reply` (a
  /// redirection or a transient cluster error; see batcher_options::reroute), at `now`:
  /// TRYAGAIN on a batch is retried alone on the same node.
  op_step on_handed_back(const redisReply& reply, const node_address& node, clock::time_point now);

  int redirects() const noexcept { return redirects_; }
  clock::time_point deadline() const noexcept { return deadline_; }

 private:
  op_step retry(node_address target, bool asking, clock::time_point now);

  clock::time_point deadline_;
  int redirects_ = 0;
};

/// When to fetch the slot map (CLUSTER SLOTS) again: at most every refresh_min_interval,
/// one round at a time (a request during a round makes one more round after it), and a
/// failed round retried on its own with a doubling backoff (an idle client whose cluster
/// is down still notices when it comes back).
class refresh_fsm {
 public:
  using clock = std::chrono::steady_clock;

  /// What to do about a request.
  struct step {
    enum class kind : std::uint8_t {
      nothing,  ///< a round is running (one more follows it) or a wake-up is set already
      start,    ///< start a round now
      wait,     ///< set a wake-up at `at`, then call on_wakeup()
    };
    kind what = kind::nothing;
    clock::time_point at{};
  };

  /// Someone asks for a refresh at `now`.
  step request(clock::time_point now);
  /// The wake-up set by a `wait` step fired at `now`.
  step on_wakeup(clock::time_point now);

  /// What a round's end says.
  struct round_end {
    bool warn = false;         ///< the first failure after a success (or ever): say so once
    bool start_again = false;  ///< request() again now (asked for meanwhile, or it failed)
  };
  /// The round started by a `start` step ended: a map was installed (`ok`) or no node
  /// answered.
  round_end on_round_done(bool ok);

  bool refreshing() const noexcept { return refreshing_; }
  std::chrono::milliseconds backoff() const noexcept { return backoff_; }

 private:
  bool refreshing_ = false;
  bool again_ = false;
  bool waiting_ = false;
  bool ever_ = false;  // a round has started
  clock::time_point last_{};
  std::chrono::milliseconds backoff_{0};
};

}  // namespace sluice::redis::cluster
