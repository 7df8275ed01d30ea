#include "grpc/h2_connection.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <type_traits>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/buffer.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

namespace sluice::daemon::grpc {
namespace {

namespace asio = boost::asio;
using steady = std::chrono::steady_clock;
using tls_stream = asio::ssl::stream<worker_socket>;

template <class Stream>
class h2_connection final : public call_sink,
                            public connection_handle,
                            public std::enable_shared_from_this<h2_connection<Stream>> {
 public:
  template <class... Args>
  h2_connection(std::shared_ptr<connection_context> ctx, Args&&... stream_args)
      : ctx_(std::move(ctx)),
        stream_(std::forward<Args>(stream_args)...),
        timer_(stream_.get_executor()),
        session_(ctx_->opts.h2, [this](const h2_call& c) { on_call(c); }),
        accepted_(steady::now()) {}

  ~h2_connection() override { ctx_->connection_ended(); }

  void hold(std::shared_ptr<void> tls) { tls_ = std::move(tls); }

  worker_executor executor() { return socket().get_executor(); }

  void start() {
    boost::system::error_code ignored;
    socket().set_option(asio::ip::tcp::no_delay(true), ignored);
    rearm();
    if constexpr (std::is_same_v<Stream, tls_stream>) {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](boost::system::error_code ec) {
                                if (ec) {
                                  self->log_handshake("TLS handshake failed: " + ec.message());
                                  return self->close_socket();
                                }
                                self->flush();
                                self->read();
                              });
    } else {
      flush();  // the server's SETTINGS go first
      read();
    }
  }

  void drain() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (self->closed_) return;
      self->session_.shutdown();
      self->flush();
    });
  }

  void close() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->close_socket(); });
  }

  // From rls_calls, on this connection's thread.
  void answer(std::int32_t stream_id, status_code code, std::string_view message,
              std::string_view response) override {
    if (closed_) return;
    session_.answer(stream_id, code, message, response);
    // Answers completing inside a read go out together once it is processed.
    if (!in_receive_) after_event();
  }

 private:
  auto& socket() { return stream_.lowest_layer(); }

  void on_call(const h2_call& c) {
    ctx_->calls.serve(c, std::static_pointer_cast<call_sink>(this->shared_from_this()),
                      stream_.get_executor());
  }

  void read() {
    if (reading_ || closed_ || !session_.alive()) return;
    // A client that does not take its answers is not read from (no new calls) until it does.
    if (writing_ && in_write_.size() >= ctx_->opts.max_output_bytes) return;
    reading_ = true;
    stream_.async_read_some(asio::buffer(rbuf_), [self = this->shared_from_this()](
                                                     boost::system::error_code ec, std::size_t n) {
      self->reading_ = false;
      if (ec) return self->close_socket();  // closed, reset, or TLS ended
      self->on_read(n);
    });
  }

  void on_read(std::size_t n) {
    in_receive_ = true;
    const bool ok = session_.receive(rbuf_.data(), n, steady::now());
    in_receive_ = false;
    if (!ok) log_protocol("HTTP/2 error; connection ended with GOAWAY");
    after_event();
    read();
  }

  // After anything that may have changed the session: send, re-arm the timer, close when done.
  void after_event() {
    if (session_.open_streams() == 0) {
      if (!idle_since_) idle_since_ = steady::now();
    } else {
      idle_since_.reset();
    }
    flush();
    rearm();
  }

  void flush() {
    if (closed_ || writing_) return;
    if (!session_.take_output(in_write_, ctx_->opts.max_output_bytes)) {
      return close_socket();
    }
    if (in_write_.empty()) {
      if (!session_.alive()) close_socket();
      return;
    }
    writing_ = true;
    write_started_ = steady::now();
    asio::async_write(stream_, asio::buffer(in_write_),
                      [self = this->shared_from_this()](boost::system::error_code ec, std::size_t) {
                        self->writing_ = false;
                        self->in_write_.clear();
                        if (ec) return self->close_socket();
                        self->flush();
                        self->read();
                        self->rearm();
                      });
  }

  // The one timer wakes at the earliest of: the handshake and preface deadline, the idle
  // deadline, a write's deadline and the session's (calls, slow requests). It is re-armed
  // only for an earlier time; a wake that finds nothing due re-arms for the next.
  std::optional<steady::time_point> next_wake() {
    std::optional<steady::time_point> at = session_.next_deadline();
    auto earliest = [&at](steady::time_point t) { at = at ? std::min(*at, t) : t; };
    if (!session_.preface_received()) earliest(accepted_ + ctx_->opts.handshake_timeout);
    if (idle_since_) earliest(*idle_since_ + ctx_->opts.idle_timeout);
    if (writing_) earliest(write_started_ + ctx_->opts.idle_timeout);
    return at;
  }

  void rearm() {
    if (closed_) return;
    const auto at = next_wake();
    if (!at || (armed_ && *armed_ <= *at)) return;
    armed_ = at;
    timer_.expires_at(*at);
    timer_.async_wait([self = this->shared_from_this(), at](boost::system::error_code ec) {
      if (ec || self->armed_ != at) return;  // replaced by an earlier wake
      self->armed_.reset();
      self->on_timer(steady::now());
    });
  }

  void on_timer(steady::time_point now) {
    if (closed_) return;
    if (!session_.preface_received() && now >= accepted_ + ctx_->opts.handshake_timeout) {
      log_handshake("no HTTP/2 preface within the handshake timeout");
      return close_socket();
    }
    if (writing_ && now >= write_started_ + ctx_->opts.idle_timeout) {
      log_protocol("a write waited longer than the idle timeout; connection closed");
      return close_socket();
    }
    if (idle_since_ && now >= *idle_since_ + ctx_->opts.idle_timeout) {
      idle_since_.reset();
      session_.shutdown();  // GOAWAY; with no stream open the session ends once it is sent
    }
    session_.expire(now);
    after_event();
  }

  void close_socket() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    timer_.cancel();
    socket().shutdown(asio::socket_base::shutdown_both, ignored);
    socket().close(ignored);
  }

  std::string peer() {
    boost::system::error_code ec;
    const auto ep = socket().remote_endpoint(ec);
    return ec ? std::string("?") : ep.address().to_string();
  }

  void log_handshake(const std::string& what) {
    if (const auto n = ctx_->handshake_log.admit()) {
      spdlog::info("envoy_rls: {} from {} (connection closed; {} such in this burst)", what, peer(),
                   n);
    }
  }
  void log_protocol(const std::string& what) {
    if (const auto n = ctx_->protocol_log.admit()) {
      spdlog::info("envoy_rls: {} ({}; {} such in this burst)", what, peer(), n);
    }
  }

  std::shared_ptr<connection_context> ctx_;
  // The TLS context the stream was made with (and what it needs, such as the client name
  // its verification checks): a reload may replace the listener's while this one lives.
  std::shared_ptr<void> tls_;
  Stream stream_;
  asio::steady_timer timer_;
  h2_session session_;
  steady::time_point accepted_;
  steady::time_point write_started_{};
  std::optional<steady::time_point> idle_since_;
  std::optional<steady::time_point> armed_;
  std::array<std::uint8_t, 16 * 1024> rbuf_{};
  std::string in_write_;
  bool reading_ = false;
  bool writing_ = false;
  bool in_receive_ = false;
  bool closed_ = false;
};

}  // namespace

std::shared_ptr<connection_handle> start_connection(worker_socket socket,
                                                    std::shared_ptr<asio::ssl::context> tls,
                                                    std::shared_ptr<connection_context> ctx) {
  if (tls) {
    // The context is shared by the connections made while it is the listener's, and each
    // holds it: a reload may put another in force.
    auto c = std::make_shared<h2_connection<tls_stream>>(std::move(ctx), std::move(socket), *tls);
    c->hold(std::move(tls));
    asio::dispatch(c->executor(), [c] { c->start(); });
    return c;
  }
  auto c = std::make_shared<h2_connection<worker_socket>>(std::move(ctx), std::move(socket));
  asio::dispatch(c->executor(), [c] { c->start(); });
  return c;
}

}  // namespace sluice::daemon::grpc
