#pragma once
// The protocol state of one Redis connection, without any I/O: requests accepted, written
// and answered in order (replies are matched FIFO), the handshake's replies, deadlines, and
// when the connection counts as stuck. The connection (connection.hpp) feeds it events (a
// request, a write started or finished, a reply, the time) and does what it says (write
// these bytes, wake me then, reconnect); the unit tests drive it the same way without a
// socket or a timer (tests/unit/redis_request_pipeline_test.cpp).
//
// A request's deadline is its caller's. Past it, the request fails with backend_timeout and
// stays in line for the reply still to come, which is dropped: that alone says nothing about
// the connection. The connection is stuck only when the oldest written request has had no
// reply for a whole command timeout since it was written, or a write has not finished for
// as long. Single-threaded: the connection's I/O thread owns it.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "redis/resp.hpp"

namespace sluice::redis {

/// Completion of a request: an error (sluice::errc) or a reply (which may be a Redis error
/// reply: that is the caller's to interpret).
using exec_handler = std::function<void(std::error_code, reply_ptr)>;

/// Where a connection is in its life cycle.
enum class link_state : std::uint8_t {
  connecting,  ///< first attempt in progress: requests wait (within their deadline)
  up,          ///< serving
  down,        ///< failed, retrying in the background: requests fail at once
  stopped,     ///< stopped: requests fail with backend_shutting_down
};

class request_pipeline {
 public:
  using clock = std::chrono::steady_clock;
  struct request {
    std::string command;
    clock::time_point deadline;
    exec_handler handler;         // empty once completed
    std::size_t replies = 1;      // replies still expected; the handler gets the last one
    clock::time_point written{};  // when its write started (once written)
  };

  /// What a reply was to the pipeline.
  enum class reply_kind : std::uint8_t {
    handshake,          ///< a handshake reply; more of them are expected
    handshake_done,     ///< the handshake's last reply: the connection is up
    handshake_refused,  ///< an error reply to the handshake: the attempt failed
    answered,           ///< a request's reply (or a leading one of its group), delivered
    unexpected,         ///< nothing was waiting for a reply: the stream is out of step
  };

  /// What expire() found.
  enum class stuck : std::uint8_t { no, no_reply, write_unfinished };

  /// `pending` counts requests accepted and not yet completed (decremented here as each
  /// completes); it may be read from other threads.
  request_pipeline(std::chrono::milliseconds command_timeout,
                   std::atomic<std::size_t>& pending) noexcept
      : command_timeout_(command_timeout), pending_(pending) {}

  /// Takes `r` in line to be written, or completes it at once (down, stopped, or past its
  /// deadline already: not worth Redis's time). True when taken.
  bool accept(request& r, link_state s, clock::time_point now);

  /// Whether requests wait to be written.
  bool has_unsent() const noexcept { return !unsent_.empty(); }
  /// Appends every waiting request's bytes to `out` and moves them in line for replies,
  /// written at `now`; the connection then writes `out`.
  void take_unsent(std::string& out, clock::time_point now);

  /// A new connection's handshake: the next `replies` replies answer it.
  void begin_handshake(std::size_t replies) noexcept { handshake_left_ = replies; }
  bool in_handshake() const noexcept { return handshake_left_ > 0; }
  /// One reply off the wire, in order.
  reply_kind on_reply(reply_ptr reply);

  /// Fails what is past its deadline at `now`, and says whether the connection is stuck.
  /// `write_started`: when the write in progress began, if one is.
  stuck expire(clock::time_point now, std::optional<clock::time_point> write_started);
  /// When expire() has something to do next: the earliest deadline of a request not yet
  /// completed, or the moment the connection would count as stuck; none when idle.
  std::optional<clock::time_point> next_expiry(
      std::optional<clock::time_point> write_started) const;

  /// Completes every written request with `written_ec` and every unwritten one with
  /// `unsent_ec`, and forgets the handshake (the connection is gone). Handlers may accept
  /// new requests meanwhile; those stay.
  void fail_all(std::error_code written_ec, std::error_code unsent_ec);

  /// Completes every written request with `ec` (the server they went to is gone); the
  /// unwritten ones stay in line for the next connection. Forgets the handshake.
  void fail_written(std::error_code ec);

  std::size_t in_flight() const noexcept { return in_flight_.size(); }

 private:
  void complete(request& r, std::error_code ec, reply_ptr reply = nullptr);

  std::chrono::milliseconds command_timeout_;
  std::atomic<std::size_t>& pending_;
  std::deque<request> unsent_;     // accepted, not yet written
  std::deque<request> in_flight_;  // written, awaiting replies in this order
  std::size_t handshake_left_ = 0;
};

}  // namespace sluice::redis
