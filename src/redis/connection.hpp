#pragma once
// One multiplexed, auto-pipelined connection to one Redis server, on Asio.
//
// Callers on any thread submit formatted commands; everything queued while a write is in
// progress goes out in the next single write (automatic pipelining, no added delay: a lone
// request is written at once). Replies are matched FIFO. Every request has the same
// timeout, so deadlines are FIFO-ordered and one timer on the oldest pending request
// replaces a timer per request: it fires rarely and re-arms itself lazily.
//
// The connection owns its life cycle (Boost.Redis's async_run, as callbacks): connect with
// a timeout, for TLS the TLS handshake, then a handshake (AUTH, SELECT, SCRIPT LOAD, PING),
// all within the same timeout, then serve; on any failure close, fail what is in flight, and
// reconnect with exponential backoff and jitter. While it is known to be down, submissions fail at
// once with backend_unavailable (a circuit breaker: microseconds per call, not a timeout each).
// A request may bring an earlier deadline of its own (a decision that waited in the
// batcher, decision_batcher.hpp), so the timer goes to the earliest pending deadline.
// Several connections can share one io_context (a pool is a vector of these).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "redis/resp.hpp"
#include "redis/tls.hpp"

namespace sluice::redis {

struct connection_config {
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  /// Formatted commands sent first on every connection (AUTH, SELECT, SCRIPT LOAD...);
  /// an error reply to any of them fails the attempt. A PING is always added.
  std::string handshake;
  std::size_t handshake_replies = 0;
  std::chrono::milliseconds connect_timeout{250};  ///< connect + handshake
  std::chrono::milliseconds command_timeout{50};   ///< from submission to reply
  std::size_t max_in_flight = 65536;
  std::chrono::milliseconds backoff_min{25};
  std::chrono::milliseconds backoff_max{1000};
  std::string name = "redis";  ///< for log lines
  /// TLS when `tls.context` is set (shared by every connection of a backend).
  tls_config tls;
};

/// Completion of connection::async_exec: an error (sluice::errc) or a reply (which may be a
/// Redis error reply: that is the caller's to interpret).
using exec_handler = std::function<void(std::error_code, reply_ptr)>;

/// The reconnect delay before attempt `attempt` (0 = first retry: immediately), before
/// jitter: backoff_min * 2^(attempt-1), at most backoff_max.
std::chrono::milliseconds backoff_delay(unsigned attempt, std::chrono::milliseconds min,
                                        std::chrono::milliseconds max) noexcept;

class connection : public std::enable_shared_from_this<connection> {
 public:
  enum class state : std::uint8_t {
    connecting,  ///< first attempt in progress: requests wait (within their deadline)
    up,          ///< serving
    down,        ///< failed, retrying in the background: requests fail at once
    stopped,     ///< stop() was called: requests fail with backend_shutting_down
  };

  connection(boost::asio::io_context& io, connection_config config);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Starts connecting in the background. Call once.
  void start();
  /// Fails every pending request with backend_shutting_down, closes the socket and stops
  /// reconnecting; handlers run on the I/O thread. Thread-safe, idempotent.
  void stop();

  /// Sends one formatted command. `handler` runs exactly once: on the I/O thread, or inline
  /// when the request is refused at once (down, overloaded, stopped). Errors:
  /// backend_unavailable, backend_timeout, backend_overloaded, backend_protocol_error,
  /// backend_shutting_down. Thread-safe.
  ///
  /// `command` may hold `replies` formatted commands that must go out back to back (Redis
  /// Cluster's ASKING before the command it applies to); `handler` gets the last reply and
  /// the earlier ones are dropped.
  void async_exec(std::string command, exec_handler handler, std::size_t replies = 1);
  /// async_exec with a deadline of the caller's instead of now + command_timeout.
  void async_exec_until(std::chrono::steady_clock::time_point deadline, std::string command,
                        exec_handler handler, std::size_t replies = 1);

  state current_state() const noexcept { return state_.load(std::memory_order_acquire); }
  /// Requests submitted and not yet completed (a load figure: read without a lock).
  std::size_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

 private:
  using clock = std::chrono::steady_clock;
  using tls_stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  struct request {
    std::string command;
    clock::time_point deadline;
    exec_handler handler;     // empty once completed
    std::size_t replies = 1;  // replies still expected; the handler gets the last one
  };

  void flush();
  void do_stop();
  void connect();
  void on_tcp_connected();
  void on_connected();
  boost::asio::ip::tcp::socket& tcp_socket() noexcept;
  // Calls f(stream) with the TLS stream or the plain socket: one code path for both.
  template <class F>
  void with_stream(F&& f);
  void start_read();
  void on_reply(reply_ptr reply);
  void write_pending();
  void arm_deadline_timer();
  void watch_deadline(clock::time_point deadline);
  void set_deadline_timer(clock::time_point at);
  void on_deadline();
  void up();
  void connect_failed(const std::string& why);
  void lose_connection(std::error_code for_in_flight, const std::string& why);
  void reset_socket();
  void schedule_reconnect();
  void set_state(state s);
  void complete(request& r, std::error_code ec, reply_ptr reply = nullptr);
  void fail_all(std::deque<request>& q, std::error_code ec);

  const connection_config config_;
  boost::asio::io_context& io_;

  // Shared with submitting threads (under mu_).
  std::mutex mu_;
  std::vector<request> submitted_;
  bool flush_posted_ = false;
  bool stopped_ = false;
  std::atomic<state> state_{state::connecting};
  std::atomic<std::size_t> pending_{0};  // submitted and not yet completed

  // I/O thread only.
  boost::asio::ip::tcp::socket socket_;  // plain TCP (unused with TLS)
  // With TLS, a fresh stream per attempt (an ssl::stream cannot be reused once closed).
  // Shared with the handlers of operations started on it, so a stream replaced by a
  // reconnect lives until its aborted operations have completed.
  std::shared_ptr<tls_stream> tls_;
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer backoff_timer_;
  std::deque<request> unsent_;     // accepted, not yet written
  std::deque<request> in_flight_;  // written, awaiting replies in this order
  std::string write_buffer_;
  bool writing_ = false;
  bool deadline_armed_ = false;
  clock::time_point armed_for_{};       // when deadline_armed_
  std::uint64_t timer_generation_ = 0;  // bumped per arming: a replaced wait sees a new number
  bool connecting_ = false;             // between connect() and the handshake's last reply
  std::size_t handshake_left_ = 0;
  std::uint64_t generation_ = 0;  // bumped per socket: stale callbacks see a new number
  unsigned attempt_ = 0;
  std::unique_ptr<reply_reader> reader_;
  std::vector<char> read_buffer_;
  std::minstd_rand jitter_;
};

}  // namespace sluice::redis
