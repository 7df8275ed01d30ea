#pragma once
// The life cycle of one Redis connection, without any I/O: connecting, up, down (retrying in
// the background) and stopped; what each event does to it, and how long to wait before the
// next attempt (exponential backoff with jitter). The connection (connection.hpp) reports
// events and does what the answer says (log, fail its requests, arm its backoff timer); the
// unit tests drive it the same way with no socket and no timer
// (tests/unit/redis_link_lifecycle_test.cpp).
//
// The state is an atomic because submitting threads read it (the circuit breaker: one load
// while Redis is known to be down); only the connection's I/O thread changes it.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

#include "redis/request_pipeline.hpp"

namespace sluice::redis {

/// The reconnect delay before attempt `attempt` (0 = first retry: immediately), before
/// jitter: backoff_min * 2^(attempt-1), at most backoff_max.
std::chrono::milliseconds backoff_delay(unsigned attempt, std::chrono::milliseconds min,
                                        std::chrono::milliseconds max) noexcept;

class link_lifecycle {
 public:
  /// What a failure asks of the connection.
  struct failure {
    /// It was not down before: the first failure of a run, worth a warning (later failed
    /// attempts are routine while Redis stays away).
    bool first = false;
    /// Try again after this long.
    std::chrono::milliseconds retry_in{0};
  };

  link_lifecycle(std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max,
                 std::uint32_t jitter_seed) noexcept
      : backoff_min_(backoff_min), backoff_max_(backoff_max), jitter_(jitter_seed) {}

  /// Any thread.
  link_state state() const noexcept { return state_.load(std::memory_order_acquire); }
  /// Attempts that failed in a row since the connection was last up.
  unsigned failed_attempts() const noexcept { return failed_; }

  /// The handshake's last reply came: up, and the next loss is retried at once.
  void connected() noexcept;
  /// A connection attempt (connect, TLS, handshake) failed: down, and tried again after a
  /// backoff that grows with every failure in a row (never at once: the server just refused).
  /// None once stopped: nothing to do.
  std::optional<failure> attempt_failed();
  /// A connection that was up is gone (read or write failed, stuck, out of step): down, and
  /// the first retry is at once (a restarted server is usually back). None once stopped.
  std::optional<failure> lost();
  /// Pointed at another server: connecting there at once, the backoff forgotten. False once
  /// stopped.
  bool retarget() noexcept;
  /// For good: requests are refused with backend_shutting_down from now on.
  void stop() noexcept { set(link_state::stopped); }

 private:
  void set(link_state s) noexcept { state_.store(s, std::memory_order_release); }
  std::optional<failure> fail(unsigned attempt);

  const std::chrono::milliseconds backoff_min_;
  const std::chrono::milliseconds backoff_max_;
  std::atomic<link_state> state_{link_state::connecting};
  unsigned next_attempt_ = 0;  // backoff_delay's argument for the next retry
  unsigned failed_ = 0;
  std::minstd_rand jitter_;
};

}  // namespace sluice::redis
