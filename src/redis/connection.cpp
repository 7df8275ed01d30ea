#include "redis/connection.hpp"

#include <sluice/error.hpp>
#include "core/coalesced_post.hpp"
#include "core/log.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/write.hpp>

namespace sluice::redis {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

connection::connection(asio::io_context& io, connection_config config)
    : config_(std::move(config)),
      io_(io),
      source_(config_.address ? config_.address : fixed_address({config_.host, config_.port})),
      host_(config_.host),
      port_(config_.port),
      socket_(io),
      resolver_(io),
      deadline_timer_(io),
      connect_timer_(io),
      backoff_timer_(io),
      life_(config_.backoff_min, config_.backoff_max, std::random_device{}()),
      pipeline_(config_.command_timeout, pending_),
      read_buffer_(64 * 1024) {}

connection::~connection() = default;

tcp::socket& connection::tcp_socket() noexcept { return tls_ ? tls_->next_layer() : socket_; }

template <class F>
void connection::with_stream(F&& f) {
  if (tls_) {
    f(*tls_);
  } else {
    f(socket_);
  }
}

void connection::start() {
  asio::post(io_, [self = shared_from_this()] {
    if (self->current_state() == state::stopped) return;
    self->source_->start([weak = std::weak_ptr<connection>(self)](const server_address& a) {
      if (auto c = weak.lock()) c->move_to(a);
    });
    self->connect();
  });
}

void connection::retarget(std::string host, std::uint16_t port) {
  asio::post(io_, [self = shared_from_this(), a = server_address{std::move(host), port}]() mutable {
    if (self->current_state() == state::stopped) return;
    self->source_->pointed_at(a);
    self->move_to(std::move(a));
  });
}

void connection::move_to(server_address a) {
  if (a.host == host_ && a.port == port_) return;
  if (!life_.retarget()) return;  // stopped
  sluice::detail::logf(sluice::log_level::info, "{}: {}:{} -> {}:{}", config_.name, host_, port_,
                       a.host, a.port);
  host_ = std::move(a.host);
  port_ = a.port;
  // What was written went to the old server: its fate is unknown there. What was not
  // written waits for the new one, within its deadline.
  reset_socket();
  backoff_timer_.cancel();
  pipeline_.fail_written(make_error_code(errc::backend_unavailable));
  connect();
  arm_deadline_timer();
}

void connection::stop() {
  asio::post(io_, [self = shared_from_this()] { self->do_stop(); });
}

void connection::async_control(std::string command, exec_handler handler) {
  // The circuit breaker: one atomic load while Redis is known to be down.
  switch (current_state()) {
    case state::down:
      handler(make_error_code(errc::backend_unavailable), nullptr);
      return;
    case state::stopped:
      handler(make_error_code(errc::backend_shutting_down), nullptr);
      return;
    default:
      break;
  }
  if (control_pending_.fetch_add(1, std::memory_order_relaxed) >= config_.max_control_in_flight) {
    control_pending_.fetch_sub(1, std::memory_order_relaxed);
    handler(make_error_code(errc::backend_overloaded), nullptr);
    return;
  }
  // Control traffic is rare: a wrapper that gives the bound back costs nothing that matters.
  exec_handler done = [self = shared_from_this(), handler = std::move(handler)](std::error_code ec,
                                                                                reply_ptr reply) {
    self->control_pending_.fetch_sub(1, std::memory_order_relaxed);
    handler(ec, std::move(reply));
  };
  bool post = false;
  {
    std::unique_lock lock(mu_);
    if (stopped_) {
      lock.unlock();
      done(make_error_code(errc::backend_shutting_down), nullptr);
      return;
    }
    pending_.fetch_add(1, std::memory_order_relaxed);
    submitted_.push_back(
        {std::move(command), clock::now() + config_.command_timeout, std::move(done), 1});
    post = !std::exchange(flush_posted_, true);
  }
  // One posted flush serves everything submitted until it runs.
  if (post) asio::post(io_, [self = shared_from_this()] { self->flush(); });
}

void connection::flush() {
  std::vector<request> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(submitted_);
    flush_posted_ = false;
  }
  const state s = current_state();
  const auto now = clock::now();
  std::optional<clock::time_point> earliest;
  for (auto& r : batch) {
    const auto deadline = r.deadline;
    if (pipeline_.accept(r, s, now) && (!earliest || deadline < *earliest)) earliest = deadline;
  }
  write_pending();
  if (earliest) watch_deadline(*earliest);
}

void connection::exec_on_io_thread(clock::time_point deadline, std::string command,
                                   exec_handler handler, std::size_t replies) {
  pending_.fetch_add(1, std::memory_order_relaxed);
  request r{std::move(command), deadline, std::move(handler), std::max<std::size_t>(replies, 1)};
  if (!pipeline_.accept(r, current_state(), clock::now())) return;
  write_pending();
  watch_deadline(deadline);
}

void connection::write_pending() {
  if (writing_ || !pipeline_.has_unsent() || current_state() != state::up) return;
  write_buffer_.clear();
  const auto now = clock::now();
  pipeline_.take_unsent(write_buffer_, now);
  writing_ = true;
  write_started_ = now;
  with_stream([&](auto& stream) {
    asio::async_write(stream, asio::buffer(write_buffer_),
                      [self = shared_from_this(), gen = generation_, keep = tls_](
                          boost::system::error_code ec, std::size_t) {
                        if (gen != self->generation_) return;
                        self->writing_ = false;
                        if (ec) {
                          self->lose_connection(make_error_code(errc::backend_unavailable),
                                                "write failed: " + ec.message());
                          return;
                        }
                        self->write_pending();
                      });
  });
}

std::optional<connection::clock::time_point> connection::write_started() const {
  // The handshake's write is the connect timer's to watch.
  if (writing_ && current_state() == state::up) return write_started_;
  return std::nullopt;
}

void connection::arm_deadline_timer() {
  if (deadline_armed_) return;
  if (const auto at = pipeline_.next_expiry(write_started())) set_deadline_timer(*at);
}

void connection::watch_deadline(clock::time_point deadline) {
  if (!deadline_armed_ || deadline < armed_for_) set_deadline_timer(deadline);
}

void connection::set_deadline_timer(clock::time_point at) {
  deadline_armed_ = true;
  armed_for_ = at;
  // expires_at cancels an earlier wait; its handler sees a stale generation and does nothing.
  deadline_timer_.expires_at(at);
  deadline_timer_.async_wait(
      [self = shared_from_this(), gen = ++timer_generation_](boost::system::error_code ec) {
        if (gen != self->timer_generation_) return;
        self->deadline_armed_ = false;
        if (ec || self->current_state() == state::stopped) return;
        self->on_deadline();
      });
}

void connection::on_deadline() {
  // The timer was set for a request that may have been answered since; it is re-armed
  // for whatever is earliest now, so replies never touch the timer.
  switch (pipeline_.expire(clock::now(), write_started())) {
    case request_pipeline::stuck::no_reply:
      lose_connection(make_error_code(errc::backend_timeout),
                      "no reply within the command timeout");
      return;
    case request_pipeline::stuck::write_unfinished:
      lose_connection(make_error_code(errc::backend_timeout), "a write did not finish in time");
      return;
    case request_pipeline::stuck::no:
      break;
  }
  arm_deadline_timer();
}

void connection::reset_socket() {
  ++generation_;
  boost::system::error_code ignored;
  // Closing the TCP socket aborts the TLS stream's operations too; the stream itself is
  // kept by their handlers and replaced on the next attempt.
  tcp_socket().close(ignored);
  resolver_.cancel();
  connect_timer_.cancel();
  writing_ = false;
  connecting_ = false;
}

void connection::connect() {
  if (current_state() == state::stopped) return;
  reset_socket();
  reader_ = std::make_unique<reply_reader>();
  if (config_.tls.context) tls_ = std::make_shared<tls_stream>(io_, *config_.tls.context);
  connecting_ = true;
  const auto gen = generation_;

  connect_timer_.expires_after(config_.connect_timeout);
  connect_timer_.async_wait([self = shared_from_this(), gen](boost::system::error_code ec) {
    // The timer may have expired just as the handshake finished: connecting_ tells.
    if (ec || gen != self->generation_ || !self->connecting_) return;
    self->connect_failed("no connection and handshake within " +
                         std::to_string(self->config_.connect_timeout.count()) + " ms");
  });

  // Where to: asked on every attempt, within the connect timeout (a Sentinel's answer may
  // take a round trip; a fixed address answers inline).
  source_->resolve([self = shared_from_this(), gen](std::optional<server_address> a) {
    if (gen != self->generation_) return;
    if (!a) {
      self->connect_failed("no address known for the server");
      return;
    }
    // A new answer here is the source's to log (a Sentinel names the master it found).
    self->host_ = std::move(a->host);
    self->port_ = a->port;
    self->connect_to(gen);
  });
}

void connection::connect_to(std::uint64_t gen) {
  auto on_connect = [self = shared_from_this(), gen, keep = tls_](boost::system::error_code ec,
                                                                  const tcp::endpoint&) {
    if (gen != self->generation_) return;
    if (ec) {
      self->connect_failed(ec.message());
      return;
    }
    self->on_tcp_connected();
  };
  boost::system::error_code addr_ec;
  const auto addr = asio::ip::make_address(host_, addr_ec);
  if (!addr_ec) {
    const std::vector<tcp::endpoint> endpoints{tcp::endpoint(addr, port_)};
    asio::async_connect(tcp_socket(), endpoints, std::move(on_connect));
    return;
  }
  resolver_.async_resolve(
      host_, std::to_string(port_),
      [self = shared_from_this(), gen, on_connect = std::move(on_connect)](
          boost::system::error_code ec, tcp::resolver::results_type results) mutable {
        if (gen != self->generation_) return;
        if (ec) {
          self->connect_failed("cannot resolve " + self->host_ + ": " + ec.message());
          return;
        }
        asio::async_connect(self->tcp_socket(), results, std::move(on_connect));
      });
}

void connection::on_tcp_connected() {
  boost::system::error_code ignored;
  tcp_socket().set_option(tcp::no_delay(true), ignored);
  if (!tls_) {
    on_connected();
    return;
  }
  // The name checked is the one the certificate was issued for: sni= or the host. OpenSSL
  // checks it during the handshake (SSL_set1_host), so a mismatch fails it with a reason.
  const std::string& name = config_.tls.server_name.empty() ? host_ : config_.tls.server_name;
  SSL* ssl = tls_->native_handle();
  boost::system::error_code addr_ec;
  asio::ip::make_address(name, addr_ec);
  const bool is_address = !addr_ec;
  if (config_.tls.verify) {
    const int ok = is_address ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name.c_str())
                              : SSL_set1_host(ssl, name.c_str());
    if (ok != 1) {
      connect_failed("TLS: cannot verify against the name \"" + name + "\"");
      return;
    }
    tls_->set_verify_mode(asio::ssl::verify_peer);
  } else {
    tls_->set_verify_mode(asio::ssl::verify_none);
  }
  // SNI carries host names only (RFC 6066), never an IP address.
  if (!is_address) SSL_set_tlsext_host_name(ssl, name.c_str());
  tls_->async_handshake(
      asio::ssl::stream_base::client,
      [self = shared_from_this(), gen = generation_, keep = tls_](boost::system::error_code ec) {
        if (gen != self->generation_) return;
        if (ec) {
          std::string why = "TLS handshake failed: " + ec.message();
          const long verify = SSL_get_verify_result(keep->native_handle());
          if (verify != X509_V_OK) {
            why += " (";
            why += X509_verify_cert_error_string(verify);
            why += ")";
          }
          self->connect_failed(why);
          return;
        }
        self->on_connected();
      });
}

void connection::on_connected() {
  // The handshake doubles as a health check: a server that accepts but does not answer
  // (stopped, a black hole) fails here within connect_timeout instead of serving.
  write_buffer_ = config_.handshake.commands;
  append_command(write_buffer_, {"PING"});
  pipeline_.begin_handshake(config_.handshake.replies + 1);
  writing_ = true;
  with_stream([&](auto& stream) {
    asio::async_write(stream, asio::buffer(write_buffer_),
                      [self = shared_from_this(), gen = generation_, keep = tls_](
                          boost::system::error_code ec, std::size_t) {
                        if (gen != self->generation_) return;
                        self->writing_ = false;
                        if (ec) {
                          self->connect_failed("handshake write failed: " + ec.message());
                          return;
                        }
                        // Requests wait in unsent_ until the handshake is answered; if that
                        // happened before this completion ran, they go now.
                        self->write_pending();
                      });
  });
  start_read();
}

void connection::start_read() {
  auto on_read = [self = shared_from_this(), gen = generation_, keep = tls_](
                     boost::system::error_code ec, std::size_t n) {
    if (gen != self->generation_) return;
    if (ec) {
      // A TLS server that exits without close_notify looks like a truncated stream.
      const bool closed = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
      const std::string why = closed ? "closed by the server" : "read failed: " + ec.message();
      if (self->pipeline_.in_handshake()) {
        self->connect_failed(why);
      } else {
        self->lose_connection(make_error_code(errc::backend_unavailable), why);
      }
      return;
    }
    if (!self->reader_->feed(self->read_buffer_.data(), n)) {
      self->lose_connection(make_error_code(errc::backend_protocol_error), "out of memory");
      return;
    }
    // The checks this read completes reach each caller's executor as one post.
    const sluice::detail::coalescing_scope one_post_per_caller;
    for (;;) {
      reply_ptr reply;
      const auto st = self->reader_->next(reply);
      if (st == reply_reader::status::incomplete) break;
      if (st == reply_reader::status::protocol_error) {
        self->lose_connection(make_error_code(errc::backend_protocol_error),
                              "protocol error: " + std::string(self->reader_->error_text()));
        return;
      }
      self->on_reply(std::move(reply));
      if (gen != self->generation_) return;  // the reply ended this connection
    }
    self->start_read();
  };
  with_stream([&](auto& stream) {
    stream.async_read_some(asio::buffer(read_buffer_), std::move(on_read));
  });
}

void connection::on_reply(reply_ptr reply) {
  // A refused handshake is logged with the server's words, read before the pipeline takes
  // the reply; a request's reply (the hot path) is not looked at here.
  std::string refused;
  if (pipeline_.in_handshake() && is_error(*reply)) refused = reply_text(*reply);
  switch (pipeline_.on_reply(std::move(reply))) {
    case request_pipeline::reply_kind::handshake_refused:
      connect_failed("handshake refused: " + refused);
      return;
    case request_pipeline::reply_kind::handshake_done:
      up();
      return;
    case request_pipeline::reply_kind::unexpected:
      lose_connection(make_error_code(errc::backend_protocol_error), "a reply nobody asked for");
      return;
    case request_pipeline::reply_kind::handshake:
    case request_pipeline::reply_kind::answered:
      return;
  }
}

void connection::up() {
  connecting_ = false;
  connect_timer_.cancel();
  life_.connected();
  source_->link_up();
  sluice::detail::logf(sluice::log_level::info, "{}: connected to {}:{}", config_.name, host_,
                       port_);
  write_pending();
  arm_deadline_timer();
}

void connection::connect_failed(const std::string& why) {
  const auto failure = life_.attempt_failed();
  if (!failure) return;  // stopped
  reset_socket();
  if (failure->first) {
    sluice::detail::logf(
        sluice::log_level::warn,
        "{}: cannot connect to {}:{} ({}); failing fast and retrying in the background",
        config_.name, host_, port_, why);
  } else {
    sluice::detail::logf(sluice::log_level::debug, "{}: reconnect attempt {} failed: {}",
                         config_.name, life_.failed_attempts(), why);
  }
  // Requests that waited for the first connection, and any written during a handshake.
  pipeline_.fail_all(make_error_code(errc::backend_unavailable),
                     make_error_code(errc::backend_unavailable));
  schedule_reconnect(failure->retry_in);
  source_->link_down();
}

void connection::lose_connection(std::error_code for_in_flight, const std::string& why) {
  const auto failure = life_.lost();
  if (!failure) return;  // stopped
  reset_socket();
  sluice::detail::logf(sluice::log_level::warn,
                       "{}: connection to {}:{} lost ({}); failing fast while reconnecting",
                       config_.name, host_, port_, why);
  pipeline_.fail_all(for_in_flight, make_error_code(errc::backend_unavailable));
  schedule_reconnect(failure->retry_in);
  source_->link_down();
}

void connection::schedule_reconnect(std::chrono::milliseconds delay) {
  backoff_timer_.expires_after(delay);
  backoff_timer_.async_wait(
      [self = shared_from_this(), gen = generation_](boost::system::error_code ec) {
        if (ec || gen != self->generation_) return;
        self->connect();
      });
}

void connection::do_stop() {
  std::vector<request> batch;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    batch.swap(submitted_);
  }
  life_.stop();
  source_->stop();
  reset_socket();
  deadline_timer_.cancel();
  backoff_timer_.cancel();
  const auto ec = make_error_code(errc::backend_shutting_down);
  pipeline_.fail_all(ec, ec);
  for (auto& r : batch) pipeline_.accept(r, state::stopped, clock::now());  // fails each
}

}  // namespace sluice::redis
