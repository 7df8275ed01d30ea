#pragma once
// Sentinel resolution without any I/O: which sentinel to ask next, what an answer means, and
// when to ask again. The Sentinel backend (sentinel_backend.cpp) feeds it answers and the
// time and does what it says (send SENTINEL get-master-addr-by-name to sentinel i, point the
// master's connection at an address, warn); tests/unit/sentinel_fsm_test.cpp drives it with
// canned replies and a time that moves only when told.
//
// A round asks the sentinels in order until one knows the master; the first answer wins. A
// round starts on the poll timer (a failover that leaves the old master reachable is noticed
// without errors), or when a call failed in a way a failover explains, at most every
// min_interval. Single-threaded: the backend's I/O thread owns it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "redis/resp.hpp"

namespace sluice::redis::sentinel {

struct master_address {
  std::string host;
  std::uint16_t port = 0;
  bool operator==(const master_address&) const = default;
};

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

}  // namespace sluice::redis::sentinel
