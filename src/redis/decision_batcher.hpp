#pragma once
// Coalesces concurrent single-key decisions into one script call (lua/decide_batch.lua)
// on one connection, so that Redis runs one EVALSHA and one TIME for many decisions: most of
// a decision's Redis CPU is the per-call cost (docs/BENCHMARKS.md, "where a decision's Redis
// CPU goes").
//
// No delay is added: a decision goes out at once while fewer than `max_batches_in_flight`
// batches await replies. Only when that many are in flight do decisions wait, and then they
// leave together, up to `max_batch` per call, as soon as one batch is answered. So batches
// stay at one decision under light load and grow by themselves when Redis is the bottleneck.
// A batch of one is sent as the single-key script, exactly as without batching.
//
// Each decision keeps its own deadline (submission + command timeout) through the wait: a
// batch is sent with the earliest deadline of its decisions, and a decision whose deadline
// passed while it waited fails with backend_timeout without being sent.
//
// On Redis Cluster (batcher_options::by_slot) a batch holds only decisions whose keys share a
// hash slot, as a script's keys must; a reply that says the slot is served elsewhere (MOVED,
// ASK, TRYAGAIN...) hands each decision of the call back to the Cluster client
// (batcher_options::reroute), which follows it on its own.
//
// Slot steps of concurrency limits (submit_slot) are batched the same way, among themselves:
// the steps that wait together (on one hash slot on Cluster) leave in one call of
// lua/slots.lua, which applies them in order and answers each; one step alone is the
// one-step call of that script, exactly as without batching. A step's key is never in a
// decision's batch, nor a decision's in a step's: they are different scripts.
//
// It is the connection's one queue of script calls, and its one admission path: single-key
// decisions and slot steps, which it batches, and opaque script calls (submit_call: check_all's
// multi-key call, a Cluster client's attempts, its refunds and the redirections it follows) wait in
// the same FIFO and are counted against the same bound. An opaque call takes no batch slot:
// it cannot share its call, so holding it back would only add delay; it leaves as soon as it
// is first in line (and a run of them is pipelined, as before there was one queue).
// It sends from the I/O thread straight into the connection's write queue
// (connection::exec_on_io_thread), so a request is locked, queued and posted once, and its
// one deadline is the connection's too. The circuit breaker and the in-flight bound are
// checked here, once per request. An opaque call leaves alone, in its place: nothing queued
// after it is sent before it (a Cluster refund reaches its node before the caller's next
// check there). Control traffic (CLUSTER SLOTS, SENTINEL queries) does not come here: it has
// the connection's small control path (connection::async_control).
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sluice/backend.hpp>

#include <boost/asio/io_context.hpp>

#include "algorithm/limit.hpp"
#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/slot_command.hpp"

namespace sluice::redis {

struct batcher_options {
  std::size_t max_batch = 32;  ///< decisions per script call; 1: no batching
  /// Calls awaiting replies before decisions wait (with max_batch 1: no limit). Four keeps
  /// Redis busy while the client handles the replies of the others (docs/BENCHMARKS.md).
  std::size_t max_batches_in_flight = 4;
  /// Decisions accepted and not yet completed, waiting or sent; more fail fast with
  /// backend_overloaded.
  std::size_t max_accepted = 65536;
  std::chrono::milliseconds command_timeout{50};
  /// Redis Cluster: batch only decisions whose keys are on one hash slot.
  bool by_slot = false;
  /// Redis Cluster: called for each decision of a call answered with a redirection or a
  /// transient cluster error (reply_action: moved, ask, retry_later, rediscover_master),
  /// with the decision's key, parameters, limit, deadline and handler and that reply. The
  /// decision is no longer the batcher's. Unset: such a reply is the decision's error.
  std::function<void(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
                     std::chrono::steady_clock::time_point deadline, decide_handler handler,
                     const reply_ptr& reply)>
      reroute{};
  /// Redis Cluster: as `reroute`, for each slot step of such a call (its key, its request,
  /// whose id is borrowed for the call, its deadline, handler and that reply). Unset: such a
  /// reply is the step's error.
  std::function<void(std::string full_key, const slot_request& request,
                     std::chrono::steady_clock::time_point deadline, slot_handler handler,
                     const reply_ptr& reply)>
      reroute_slot{};
  /// Redis Cluster: called with the error of each decision or slot step that fails here (the node
  /// down, overloaded, timed out...; not for shutting down), before its handler: the slot map may
  /// be stale. Once per failure, so a decision's path carries no wrapper for it.
  std::function<void(std::error_code)> on_failure{};
};

class decision_batcher : public std::enable_shared_from_this<decision_batcher> {
 public:
  /// Sends on `conn`, whose I/O thread runs `io`.
  decision_batcher(boost::asio::io_context& io, std::shared_ptr<connection> conn,
                   batcher_options options);
  decision_batcher(const decision_batcher&) = delete;
  decision_batcher& operator=(const decision_batcher&) = delete;

  /// Decides `params` on `full_key`. `handler` runs exactly once: on the I/O thread, or inline
  /// when the decision is refused at once (Redis known to be down, too many waiting, stopped).
  /// Thread-safe.
  void submit(std::string full_key, const detail::limit_params& params, std::uint64_t limit,
              decide_handler handler);

  /// Runs the slot step `request` (validated) on `full_key`, batched with the slot steps
  /// waiting with it (lua/slots.lua). `handler` runs exactly once, as submit()'s does.
  /// Thread-safe.
  void submit_slot(std::string full_key, const slot_request& request, slot_handler handler);

  /// Sends an opaque script call (script_exec.hpp's `Call`: append() and the completion)
  /// through the same queue and bound as the decisions (it takes no batch slot), with the caller's
  /// `deadline` and `replies` formatted commands (Cluster's ASKING before the script: 2). The
  /// call's completion runs exactly once: on the I/O thread, or inline when refused at once (down,
  /// too many accepted, stopped), with a null reply on an error. The NOSCRIPT re-send is
  /// exec_script's. Thread-safe.
  template <class Call>
  void submit_call(std::chrono::steady_clock::time_point deadline, Call call,
                   std::size_t replies = 1) {
    struct erased final : queued_call {
      explicit erased(Call c) : c(std::move(c)) {}
      void append(std::string& out, script_call how) const override { c.append(out, how); }
      void done(std::error_code ec, reply_ptr reply) override { c(ec, std::move(reply)); }
      Call c;
    };
    pending p{};
    p.deadline = deadline;
    p.call = std::make_shared<erased>(std::move(call));
    p.replies = replies;
    admit(std::move(p));
  }

  /// Fails every waiting decision with backend_shutting_down (on the I/O thread) and refuses
  /// new ones. Batches already sent complete as the connection completes them. Idempotent.
  void stop();

  /// Requests (decisions and opaque calls) accepted and not yet completed, waiting or sent
  /// (a load figure, lock-free).
  std::size_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }

  /// Decisions' script calls sent (a batch once), the decisions they carried, NOSCRIPT
  /// answers (to any call of this queue, opaque ones included), the other calls sent
  /// (opaque ones, and slot steps' calls: a batch of steps once), and the slot steps those
  /// carried.
  struct counters {
    std::uint64_t calls = 0;
    std::uint64_t decisions = 0;
    std::uint64_t noscript = 0;
    std::uint64_t other_calls = 0;
    std::uint64_t slot_steps = 0;
  };
  counters sent() const noexcept {
    constexpr auto r = std::memory_order_relaxed;
    return {calls_.load(r), decisions_.load(r), noscript_.load(r), other_calls_.load(r),
            slot_steps_.load(r)};
  }

 private:
  using clock = std::chrono::steady_clock;
  // An opaque script call, type-erased (submit_call).
  struct queued_call {
    virtual ~queued_call() = default;
    virtual void append(std::string& out, script_call how) const = 0;
    virtual void done(std::error_code ec, reply_ptr reply) = 0;
  };
  // A slot step's own part (its key is pending::full_key).
  struct slot_step {
    slot_operation op = slot_operation::acquire;
    std::string id;
    std::uint64_t limit = 1;
    std::chrono::milliseconds lease_ttl{0};
    slot_handler handler;
  };
  // One request of the queue: a decision, a slot step (`step` set), or an opaque call
  // (`call` set).
  struct pending {
    std::string full_key;
    detail::limit_params params;
    std::uint64_t limit;  // the policy's limit_of, for the decision
    clock::time_point deadline;
    decide_handler handler;
    std::uint16_t slot = 0;  // by_slot only
    std::shared_ptr<queued_call> call;
    std::size_t replies = 1;  // call only
    std::shared_ptr<slot_step> step;
  };
  using batch = std::vector<pending>;
  struct single_call;  // the script calls of send_single and send_batch (script_exec.hpp)
  struct batch_call;
  struct opaque_call;
  struct slots_call;

  // The admission path of every request: the breaker, the bound, the queue, the post.
  void admit(pending p);
  void flush();
  void send(batch b);
  void send_single(pending p);
  void send_batch(std::shared_ptr<batch> b);
  void send_opaque(pending p);
  void send_slots(std::shared_ptr<batch> b);
  void batch_done();
  // Takes the next batch off waiting_ (under mu_): batch_selection.hpp's take_batch.
  batch take_batch();
  // Whether `reply` sends its call's decisions (slot steps: `slots`) elsewhere:
  // options_.reroute (reroute_slot) is set, and the
  // reply is a redirection or a transient cluster error.
  bool reroutes(const reply_ptr& reply, bool slots) const;
  // Hands `p` to options_.reroute; it is no longer this batcher's.
  void reroute(pending& p, const reply_ptr& reply);
  // Tells options_.on_failure of `ec` (not of shutting down), then answers `handler` with it.
  void fail(const decide_handler& handler, std::error_code ec) const;
  // p's handler (or its call's completion), once; what it counts is the caller's.
  void answer(pending& p, std::error_code ec, decision d = {}) const;
  static void append_batch_command(std::string& out, script_call call, const batch& b);
  // Every handler of `b` once: with `ec`, or each with its item of the reply.
  void complete(batch& b, std::error_code ec, const reply_ptr& reply);
  // Every slot step of `b` once: with `ec`, or each with its part of the reply.
  void complete_slots(batch& b, std::error_code ec, const reply_ptr& reply);
  // answer(), and p no longer counts as accepted.
  void finish(pending& p, std::error_code ec, decision d = {});

  boost::asio::io_context& io_;
  const std::shared_ptr<connection> conn_;
  const batcher_options options_;

  std::atomic<std::size_t> accepted_{0};
  std::atomic<std::uint64_t> calls_{0}, decisions_{0}, noscript_{0}, other_calls_{0},
      slot_steps_{0};
  void count_call(std::size_t decisions) noexcept {
    calls_.fetch_add(1, std::memory_order_relaxed);
    decisions_.fetch_add(decisions, std::memory_order_relaxed);
  }
  std::mutex mu_;
  std::deque<pending> waiting_;
  std::size_t in_flight_ = 0;  // batches sent and not yet completed
  bool flush_posted_ = false;
  bool stopped_ = false;
};

}  // namespace sluice::redis
