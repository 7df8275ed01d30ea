#pragma once
// One connection of sluiced's gRPC listener on Boost.Asio: it moves bytes between the socket
// (plaintext or TLS) and an h2_session, owns the connection's one timer (TLS handshake and
// preface, idle, a stuck write, the calls' deadlines) and hands the calls to rls_calls. It
// runs on one worker io_context (one thread), so it needs no strand and no lock; a call's
// answer comes back on that thread (rls_decider posts to the connection's executor).
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>

#include "grpc/h2_session.hpp"
#include "grpc/rls_calls.hpp"
#include "log_throttle.hpp"

namespace sluice::daemon::grpc {

using worker_executor = boost::asio::io_context::executor_type;
using worker_socket = boost::asio::basic_stream_socket<boost::asio::ip::tcp, worker_executor>;

/// What the connections of one listener share; outlives them (each holds a shared_ptr).
/// Thread-safe.
class connection_context {
 public:
  connection_context(service& svc, connection_options opts) : calls(svc), opts(opts) {}
  virtual ~connection_context() = default;

  rls_calls calls;
  const connection_options opts;
  log_throttle handshake_log;
  log_throttle protocol_log;

  /// Called by each connection as it is destroyed.
  virtual void connection_ended() noexcept = 0;
};

/// A connection as its listener sees it. Thread-safe (both post to the connection's thread).
class connection_handle {
 public:
  virtual ~connection_handle() = default;
  /// GOAWAY: the calls open finish, then the connection closes.
  virtual void drain() = 0;
  /// Closes now; calls in flight are dropped.
  virtual void close() = 0;
};

/// Starts serving `socket` (over TLS with `tls` when it is not null) on its executor.
std::shared_ptr<connection_handle> start_connection(worker_socket socket,
                                                    std::shared_ptr<boost::asio::ssl::context> tls,
                                                    std::shared_ptr<connection_context> ctx);

}  // namespace sluice::daemon::grpc
