#pragma once
// One multiplexed, auto-pipelined connection to one Redis server, on Asio.
//
// Requests are formatted commands (how they get here: below); everything queued while a
// write is in progress goes out in the next single write (automatic pipelining, no added
// delay: a lone request is written at once). Replies are matched FIFO. One timer, on the
// earliest pending deadline, replaces a timer per request: it fires rarely and re-arms
// itself lazily.
// What is queued, written and answered, and when a deadline or the connection runs out, is
// request_pipeline.hpp's (no I/O, unit-tested); this class does the I/O around it.
//
// The connection owns its life cycle (Boost.Redis's async_run, as callbacks): ask its
// address source where the server is (address_source.hpp: a fixed host:port, or the
// Sentinel resolver, which may also point it elsewhere later: retarget), connect with
// a timeout, for TLS the TLS handshake, then a handshake (AUTH, SELECT, SCRIPT LOAD, PING),
// all within the same timeout, then serve; on any failure close, fail what is in flight, and
// reconnect with exponential backoff and jitter (when, and in which state: link_lifecycle.hpp).
// While it is known to be down, submissions fail at once with backend_unavailable (a circuit
// breaker: microseconds per call, not a timeout each).
//
// Two ways in, each with its own admission: every script call comes through the
// connection's one queue of script calls (decision_batcher.hpp: the breaker, the in-flight
// bound and the deadline, once per request), which hands it to exec_on_io_thread from the
// I/O thread; control traffic (CLUSTER SLOTS, SENTINEL queries) comes through async_control,
// with a small bound of its own. The handshake is the connection's own (handshake.hpp).
//
// A request's deadline is its caller's: a decision that waited in the batcher
// (decision_batcher.hpp), or a NOSCRIPT re-send, keeps the deadline it was given first, so
// the timer goes to the earliest pending deadline. A request past its deadline fails with
// backend_timeout (its reply, if it comes, is dropped); that alone says nothing about the
// connection. The connection is declared stuck, and reconnected, only when the oldest
// written request has had no reply for a whole command timeout since it was written, or a
// write has not finished for as long.
// Several connections can share one io_context (a pool is a vector of these).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>

#include "redis/address_source.hpp"
#include "redis/handshake.hpp"
#include "redis/link_lifecycle.hpp"
#include "redis/request_pipeline.hpp"
#include "redis/resp.hpp"
#include "redis/tls.hpp"

namespace sluice::redis {

struct connection_config {
  std::string host = "127.0.0.1";  ///< without an address source
  std::uint16_t port = 6379;
  /// Where to connect, asked on every attempt (address_source.hpp); none: host:port.
  std::shared_ptr<address_source> address;
  /// Sent first on every connection (make_handshake: AUTH, SELECT, SCRIPT LOAD); an error
  /// reply to any of it fails the attempt. A PING is always added.
  redis::handshake handshake;
  std::chrono::milliseconds connect_timeout{250};  ///< connect + handshake
  std::chrono::milliseconds command_timeout{50};   ///< from submission to reply
  /// Control requests (async_control) pending at once; script calls are bounded by the
  /// queue above the connection (decision_batcher), not here.
  std::size_t max_control_in_flight = 64;
  std::chrono::milliseconds backoff_min{25};
  std::chrono::milliseconds backoff_max{1000};
  std::string name = "redis";  ///< for log lines
  /// TLS when `tls.context` is set (shared by every connection of a backend).
  tls_config tls;
};

class connection : public std::enable_shared_from_this<connection> {
 public:
  using state = link_state;

  connection(boost::asio::io_context& io, connection_config config);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Starts the address source and connecting in the background. Call once.
  void start();
  /// Points the connection at another server, and its address source too (a fixed one
  /// answers it from now on). A Sentinel's new master moves it the same way: the requests
  /// written to the old one fail with backend_unavailable, the unwritten ones wait for the
  /// new one within their deadlines, and it connects there at once (handshake included).
  /// Nothing if it is that server already, or stopped. Thread-safe.
  void retarget(std::string host, std::uint16_t port);
  /// I/O thread: a call failed in a way a moved server explains (READONLY, a timeout); the
  /// address source may look again (a Sentinel's, at most every 100 ms).
  void address_suspect() { source_->suspect(); }
  /// Times the address source moved the connection to another server. Any thread.
  std::uint64_t moves() const noexcept { return source_->moves(); }
  /// Fails every pending request with backend_shutting_down, closes the socket and stops
  /// reconnecting; handlers run on the I/O thread. Thread-safe, idempotent.
  void stop();

  /// The data path, the one way a script call reaches the socket (decision_batcher, the
  /// connection's one queue of script calls, is its caller): for code that runs on this
  /// connection's I/O thread, the request joins the write queue directly, with no lock and no
  /// post, so a request is admitted (breaker, in-flight bound), queued, posted and given its
  /// deadline once, by the queue above. The circuit breaker applies again here only as the
  /// pipeline's fate of the request (down, stopped). `handler` runs exactly once: on the I/O
  /// thread, or inline when the request is refused at once, or its deadline has passed
  /// already. Errors: backend_unavailable, backend_timeout, backend_protocol_error,
  /// backend_shutting_down.
  ///
  /// `command` may hold `replies` formatted commands that must go out back to back (Redis
  /// Cluster's ASKING before the command it applies to); `handler` gets the last reply and
  /// the earlier ones are dropped.
  void exec_on_io_thread(std::chrono::steady_clock::time_point deadline, std::string command,
                         exec_handler handler, std::size_t replies = 1);

  /// The control path (CLUSTER SLOTS, SENTINEL queries): one command from any thread, due
  /// within the command timeout. Its own small bound (connection_config::max_control_in_flight)
  /// and queue, so control traffic neither starves script calls nor is refused because of
  /// them. `handler` runs exactly once: on the I/O thread, or inline when refused at once
  /// (down, too many control requests, stopped). Errors as exec_on_io_thread, and
  /// backend_overloaded. Thread-safe.
  void async_control(std::string command, exec_handler handler);

  state current_state() const noexcept { return life_.state(); }
  /// Requests submitted and not yet completed (a load figure: read without a lock).
  std::size_t pending() const noexcept { return pending_.load(std::memory_order_relaxed); }

 private:
  using clock = std::chrono::steady_clock;
  using tls_stream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;
  using request = request_pipeline::request;

  void flush();
  void do_stop();
  void connect();
  void connect_to(std::uint64_t gen);
  void move_to(server_address a);
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
  std::optional<clock::time_point> write_started() const;
  void up();
  void connect_failed(const std::string& why);
  void lose_connection(std::error_code for_in_flight, const std::string& why);
  void reset_socket();
  void schedule_reconnect(std::chrono::milliseconds delay);

  const connection_config config_;
  boost::asio::io_context& io_;
  const std::shared_ptr<address_source> source_;
  std::string host_;    // I/O thread only: the address source's last answer
  std::uint16_t port_;  // I/O thread only

  // The control path's queue, shared with submitting threads (under mu_).
  std::mutex mu_;
  std::vector<request> submitted_;
  bool flush_posted_ = false;
  bool stopped_ = false;
  std::atomic<std::size_t> control_pending_{0};  // control requests not yet completed
  std::atomic<std::size_t> pending_{0};          // requests accepted and not yet completed

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
  std::string write_buffer_;
  bool writing_ = false;
  clock::time_point write_started_{};  // when writing_
  bool deadline_armed_ = false;
  clock::time_point armed_for_{};       // when deadline_armed_
  std::uint64_t timer_generation_ = 0;  // bumped per arming: a replaced wait sees a new number
  bool connecting_ = false;             // between connect() and the handshake's last reply
  std::uint64_t generation_ = 0;        // bumped per socket: stale callbacks see a new number
  link_lifecycle life_;                 // the state (read by any thread) and the backoff
  request_pipeline pipeline_;
  std::unique_ptr<reply_reader> reader_;
  std::vector<char> read_buffer_;
};

}  // namespace sluice::redis
