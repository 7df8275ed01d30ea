#pragma once
// Sentinel resolution without any I/O: which sentinel to ask next, what an answer means, and
// when to ask again (resolver), and what the master's connection is told (sentinel_address:
// the address for a connection attempt, a move). The Sentinel address source
// (sentinel_source.cpp) feeds them answers and the time and does what they say (send
// SENTINEL get-master-addr-by-name to sentinel i); tests/unit/sentinel_fsm_test.cpp and
// sentinel_address_test.cpp drive them with canned replies and a time that moves only when
// told.
//
// A round asks the sentinels in order until one knows the master; the first answer wins. A
// round starts on the poll timer (a failover that leaves the old master reachable is noticed
// without errors), or when the master's connection attempts to connect, is down, or a call
// failed in a way a failover explains, at most every min_interval. Single-threaded: the
// connection's I/O thread owns it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "redis/address_source.hpp"
#include "redis/resp.hpp"

namespace sluice::redis::sentinel {

using master_address = server_address;

/// The address in a reply to SENTINEL get-master-addr-by-name (["host", "port"]); none for
/// anything else (a null reply: the sentinel does not know the master).
std::optional<master_address> parse_master_address(const redisReply& reply);

class resolver {
 public:
  using clock = std::chrono::steady_clock;

  /// What to do next.
  struct step {
    enum class kind : std::uint8_t {
      nothing,
      ask,        ///< send the query to sentinel `sentinel`
      use,        ///< the master is at `master`, which is not the one served now
      no_master,  ///< no sentinel knew it this round; `warn` the first time in a row
    };
    kind what = kind::nothing;
    std::size_t sentinel = 0;
    master_address master;
    bool warn = false;
  };

  /// `sentinels`: how many there are (at least one); requests closer together than
  /// `min_interval` are ignored.
  resolver(std::size_t sentinels, std::chrono::milliseconds min_interval) noexcept
      : sentinels_(sentinels), min_interval_(min_interval) {}

  /// The poll timer fired (or the backend started): a round, unless one is running.
  step poll(clock::time_point now);
  /// A call failed in a way a failover explains: a round, unless one is running or the
  /// last one started less than min_interval ago.
  step request(clock::time_point now);
  /// Sentinel `i` answered the round's query with `ec` or `reply`.
  step on_answer(std::size_t i, std::error_code ec, const redisReply* reply);
  /// The master at `a` is served now (after a `use` step was carried out).
  void serving(master_address a) { serving_ = std::move(a); }

  bool asking() const noexcept { return asking_; }
  const std::optional<master_address>& served() const noexcept { return serving_; }

 private:
  step start(clock::time_point now);

  const std::size_t sentinels_;
  const std::chrono::milliseconds min_interval_;
  bool asking_ = false;
  std::size_t next_ = 0;  // the sentinel asked in the running round
  bool ever_ = false;     // a round has started
  bool warned_ = false;
  clock::time_point last_{};
  std::optional<master_address> serving_;
};

/// The Sentinel address source's logic, on the resolver: the master's connection asks for
/// an address on each attempt (resolve), reports calls that failed in a way a failover
/// explains (suspect), and is told when a round finds another master (moved). The poll timer
/// calls poll(). Sending the question is `ask`'s (sentinel i; the answer comes back through
/// on_answer, possibly inline). Single-threaded (the I/O thread), except moves().
class sentinel_address {
 public:
  using clock = resolver::clock;
  using ask_function = std::function<void(std::size_t sentinel)>;

  sentinel_address(std::size_t sentinels, std::string master_name,
                   std::chrono::milliseconds min_interval, ask_function ask)
      : master_name_(std::move(master_name)),
        ask_(std::move(ask)),
        resolver_(sentinels, min_interval) {}

  /// Who is told of a move (a round that found another master than the one served).
  void on_moved(address_source::moved_handler moved) { moved_ = std::move(moved); }
  /// Called at the end of every round (to wake a thread waiting for the first answer).
  void on_round_end(std::function<void()> f) { round_end_ = std::move(f); }

  /// A connection attempt: a round when the last one is min_interval old, and `done` gets
  /// its answer; else at once the master served (none before the first answer).
  void resolve(clock::time_point now, address_source::resolve_handler done);
  /// A call failed in a way a failover explains: a round, at most every min_interval.
  void suspect(clock::time_point now) { run(resolver_.request(now)); }
  /// The master's connection went down (an attempt failed, or it was lost): a round, at
  /// most every min_interval, and another on every down_tick() until link_up(), as when
  /// every call fails (the connection's own retries back off to a second).
  void link_down(clock::time_point now) {
    down_ = true;
    suspect(now);
  }
  void link_up() noexcept { down_ = false; }
  bool down() const noexcept { return down_; }
  /// The source's min_interval timer, while down().
  void down_tick(clock::time_point now) {
    if (down_) suspect(now);
  }
  /// The poll timer fired: a round unless one is running.
  void poll(clock::time_point now) { run(resolver_.poll(now)); }
  /// Sentinel `i` answered the question `ask` sent.
  void on_answer(std::size_t i, std::error_code ec, const redisReply* reply) {
    run(resolver_.on_answer(i, ec, reply));
  }
  /// For good: pending resolves get no address, nothing more is asked.
  void stop();
  /// stop() was called: the source arms no timer any more (a link that goes down while
  /// stopping included).
  bool stopped() const noexcept { return stopped_; }

  const std::optional<master_address>& served() const noexcept { return resolver_.served(); }
  bool asking() const noexcept { return resolver_.asking(); }
  /// Masters after the first. Any thread.
  std::uint64_t moves() const noexcept { return moves_.load(std::memory_order_relaxed); }

 private:
  void run(const resolver::step& next);
  void finish_round();

  const std::string master_name_;
  const ask_function ask_;
  resolver resolver_;
  address_source::moved_handler moved_;
  std::function<void()> round_end_;
  std::vector<address_source::resolve_handler> waiting_;  // for the running round's answer
  // The running round found another master.
  bool moved_now_ = false;
  bool down_ = false;  // the master's connection
  bool stopped_ = false;
  std::atomic<std::uint64_t> moves_{0};
};

}  // namespace sluice::redis::sentinel
