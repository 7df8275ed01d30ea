#pragma once
// The HTTP/1.1 server (Boost.Beast): a listener accepting connections and one session per
// connection, with keep-alive, read timeouts, request-size limits and a drain for SIGTERM.
// Each connection lives on one of the worker io_contexts (one thread each, so no strand and
// no lock is needed between its handlers); the acceptor hands them out in turn.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "log_throttle.hpp"
#include "service.hpp"

namespace sluice::daemon {

class session;

using worker_executor = boost::asio::io_context::executor_type;
using worker_socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, worker_executor>;

/// Thread-safe.
class server : public std::enable_shared_from_this<server> {
 public:
  /// `ioc` runs the acceptor and the drain; `workers` (`ioc` may be among them; none means
  /// `ioc` alone) run the connections, each io_context on one thread only.
  server(boost::asio::io_context& ioc, service& svc, std::vector<boost::asio::io_context*> workers);

  /// Binds and listens on `ep`; returns the bound endpoint (port 0 picks a free port).
  /// Throws boost::system::system_error when the address cannot be bound.
  boost::asio::ip::tcp::endpoint listen(const boost::asio::ip::tcp::endpoint& ep);

  /// Starts accepting connections.
  void start();

  /// Stops accepting, closes idle keep-alive connections, lets requests in flight finish
  /// (their connections close after the response), and calls `done` once no connection
  /// is left or `deadline` has passed, whichever comes first. Call once.
  void drain(std::chrono::milliseconds deadline, std::function<void()> done);

  bool draining() const noexcept { return draining_.load(std::memory_order_acquire); }
  service& svc() noexcept { return svc_; }

  // Session bookkeeping (used by session).
  void session_started(const std::shared_ptr<session>& s);
  void session_ended();
  /// Counts and logs (once per burst) a connection closed because its request `phase`
  /// (`head` or `body`) did not arrive within limits.request_head_timeout.
  void read_timed_out(std::string_view phase, const std::string& peer);
  /// Counts and logs (once per burst) an exception caught in the server's own code (a bug):
  /// the connection it belonged to is closed, the others go on.
  void io_exception(const char* what) noexcept;

 private:
  void do_accept();
  /// Starts a session for `s`, or closes it at once when limits.max_connections are open.
  void serve(worker_socket s);
  std::size_t open_connections();
  worker_executor next_session_executor();
  void finish_drain();

  boost::asio::io_context& ioc_;
  service& svc_;
  std::vector<boost::asio::io_context*> workers_;
  std::size_t next_worker_ = 0;  // acceptor strand only
  boost::asio::ip::tcp::acceptor acceptor_;
  // After an accept error (out of file descriptors, say) accepting pauses briefly instead
  // of failing again at once in a loop; the errors are logged once per burst.
  boost::asio::steady_timer accept_pause_;
  std::uint64_t accept_errors_ = 0;  // in the current burst; acceptor strand only
  std::atomic<bool> draining_{false};
  std::mutex mu_;
  std::vector<std::weak_ptr<session>> sessions_;
  std::size_t live_ = 0;
  std::function<void()> drained_;
  log_throttle rejected_log_;
  log_throttle timeout_log_;
  log_throttle io_error_log_;
  std::unique_ptr<boost::asio::steady_timer> deadline_;
};

}  // namespace sluice::daemon
