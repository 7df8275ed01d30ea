#include "server.hpp"

#include <cassert>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/bind_handler.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "response_wire.hpp"

namespace sluice::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// One connection. Everything runs on the connection's worker io_context, which one thread
// runs; `busy_` is true from a complete request until its response is written, which is
// what the drain waits for.
class session : public std::enable_shared_from_this<session> {
 public:
  session(worker_socket&& socket, std::shared_ptr<server> srv)
      : stream_(std::move(socket)), server_(std::move(srv)) {
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = ep.address().to_string();
    server_->svc().stats().connection_opened();
  }
  ~session() {
    server_->svc().stats().connection_closed();
    server_->session_ended();
  }

  void run() {
    asio::dispatch(stream_.get_executor(),
                   beast::bind_front_handler(&session::do_read, shared_from_this()));
  }

  // From the drain: a connection waiting for its next request is closed now; one with a
  // request in flight closes after answering it.
  void close_if_idle() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->busy_) self->close();
    });
  }

 private:
  enum class phase { idle, head, body };

  // Waiting for a request has two deadlines: idle_timeout for its first byte (a keep-alive
  // connection may rest that long), then request_head_timeout for the rest of its head, and
  // once more for its body. A client that opens connections and trickles bytes into them
  // cannot hold them longer than that, whatever the idle timeout is.
  void do_read() {
    if (server_->draining()) return close();
    limits_ = server_->svc().current()->cfg.limits;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    if (buffer_.size() > 0) return read_head();  // pipelined: the next request has begun
    phase_ = phase::idle;
    stream_.expires_after(limits_.idle_timeout);
    stream_.async_read_some(buffer_.prepare(first_read_size),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              // Closed, reset or idle too long: nothing to answer.
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_head();
                            });
  }

  void read_head() {
    phase_ = phase::head;
    stream_.expires_after(limits_.request_head_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&session::on_header, shared_from_this()));
  }

  // A client that sent `Expect: 100-continue` waits for a 100 before its body (curl for a
  // second, others longer); the limits were checked against the header already, so a body
  // that is too large gets its 413 instead, without a 100.
  void on_header(beast::error_code ec, std::size_t n) {
    if (ec) return on_read(ec, n);
    const auto& req = parser_->get();
    const auto expect = req[bhttp::field::expect];
    if (!parser_->is_done() && beast::iequals(expect, "100-continue")) {
      auto cont = std::make_shared<bhttp::response<bhttp::empty_body>>(bhttp::status::continue_,
                                                                       req.version());
      bhttp::async_write(stream_, *cont,
                         [self = shared_from_this(), cont](beast::error_code wec, std::size_t) {
                           if (wec) return self->close();
                           self->read_body();
                         });
      return;
    }
    read_body();
  }

  void read_body() {
    phase_ = phase::body;
    stream_.expires_after(limits_.request_head_timeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == bhttp::error::header_limit) {
      return reject(431, "headers_too_large",
                    "the request line and headers exceed " +
                        std::to_string(limits_.max_header_bytes) + " bytes");
    }
    if (ec == bhttp::error::body_limit) {
      // The limit is checked against Content-Length, so the request line has been read.
      const auto target = parser_->get().target();
      const auto endpoint = service::endpoint_of(std::string_view(target.data(), target.size()));
      server_->svc().refused_before_handling(endpoint, peer_, 413);  // an admin call is logged
      return reject(413, "body_too_large",
                    "the body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes",
                    endpoint);
    }
    if (ec == beast::error::timeout && phase_ != phase::idle) {
      server_->read_timed_out(phase_ == phase::head ? "head" : "body", peer_);
      return close();
    }
    if (ec) {
      // A malformed request gets an answer; a closed, reset or idle connection does not.
      const bool partial =
          parser_ && parser_->got_some() && ec != bhttp::error::end_of_stream &&
          ec != beast::error::timeout && ec != asio::error::operation_aborted &&
          ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category();
      if (partial) return reject(400, "bad_request", "malformed HTTP request: " + ec.message());
      return close();
    }
    busy_ = true;
    auto req = parser_->release();
    keep_alive_ = req.keep_alive();
    // The backend has its own timeout; the socket must not expire while waiting for it.
    stream_.expires_never();
    server_->svc().handle(
        std::move(req), peer_, stream_.get_executor(),
        [self = shared_from_this()](http_response res) { self->write(std::move(res)); });
  }

  // `endpoint` labels the metrics: "other" unless the request line was read.
  void reject(unsigned status, std::string_view code, const std::string& detail,
              std::string_view endpoint = "other") {
    busy_ = true;
    keep_alive_ = false;
    auto res = service::problem_response(status, code, detail);
    server_->svc().stats().request(endpoint, status, std::chrono::steady_clock::duration{});
    write(std::move(res));
  }

  // Never throws: it is the service's `done`. A response that cannot be written (no memory)
  // closes the connection instead.
  void write(http_response res) noexcept {
    try {
      start_write(std::move(res));
    } catch (const std::exception& e) {
      server_->io_exception(e.what());
      close();
    }
  }

  void start_write(http_response res) {
    assert(!writing_ && "one response at a time: out_ is the write's buffer");
    res.keep_alive(keep_alive_ && !server_->draining());
    // A HEAD answer carries its GET answer's Content-Length without the body: sizing the
    // payload again would make it 0.
    if (!res.has_content_length()) res.prepare_payload();
    const bool eof = res.need_eof();
    // The connection's one buffer, reused: no allocation per response once it has grown.
    out_.clear();
    append_wire_response(res, out_);
    writing_ = true;
    stream_.expires_after(limits_.idle_timeout);
    asio::async_write(stream_, asio::buffer(out_),
                      [self = shared_from_this(), eof](beast::error_code ec, std::size_t) {
                        self->on_write(ec, eof);
                      });
  }

  void on_write(beast::error_code ec, bool eof) {
    writing_ = false;
    busy_ = false;
    // A buffer that grew for a large answer (/metrics) is not kept while the connection idles.
    if (out_.capacity() > (64u << 10)) std::string().swap(out_);
    if (ec) return close();
    if (eof) return linger_close();
    do_read();
  }

  // Closing a socket with unread input makes the kernel send RST, which can destroy the
  // response before the client reads it (e.g. after 413 while the body still arrives). So
  // half-close, read and discard what the client still sends, briefly, then close.
  void linger_close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return close();
    stream_.expires_after(std::chrono::seconds(1));
    discard();
  }

  void discard() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->discarded_ += n;
                              if (ec || self->discarded_ > (1u << 20)) return self->close();
                              self->discard();
                            });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  // On the worker io_context's own executor type: an any_io_executor would be copied,
  // compared and destroyed through type erasure on every read and write.
  beast::basic_stream<tcp, worker_executor> stream_;
  std::shared_ptr<server> server_;
  std::string out_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  limits_config limits_;
  static constexpr std::size_t first_read_size = 4096;
  phase phase_ = phase::idle;
  bool busy_ = false;
  bool writing_ = false;  // an async_write of out_ is in flight
  bool keep_alive_ = true;
  std::array<char, 4096> scratch_{};
  std::size_t discarded_ = 0;
};

server::server(asio::io_context& ioc, service& svc, std::vector<asio::io_context*> workers)
    : ioc_(ioc),
      svc_(svc),
      workers_(workers.empty() ? std::vector<asio::io_context*>{&ioc} : std::move(workers)),
      acceptor_(asio::make_strand(ioc)),
      accept_pause_(acceptor_.get_executor()) {}

worker_executor server::next_session_executor() {
  next_worker_ = (next_worker_ + 1) % workers_.size();
  return workers_[next_worker_]->get_executor();
}

tcp::endpoint server::listen(const tcp::endpoint& ep) {
  acceptor_.open(ep.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(ep);
  acceptor_.listen(asio::socket_base::max_listen_connections);
  return acceptor_.local_endpoint();
}

void server::start() {
  asio::dispatch(acceptor_.get_executor(), [self = shared_from_this()] { self->do_accept(); });
}

void server::do_accept() {
  acceptor_.async_accept(
      next_session_executor(), [self = shared_from_this()](beast::error_code ec, worker_socket s) {
        if (self->draining() || !self->acceptor_.is_open()) return;
        if (ec) {
          if (self->accept_errors_++ == 0) {
            spdlog::warn("accept: {}; pausing accepts for 100 ms at a time", ec.message());
          }
          self->accept_pause_.expires_after(std::chrono::milliseconds{100});
          self->accept_pause_.async_wait([self](beast::error_code) {
            if (!self->draining()) self->do_accept();
          });
          return;
        }
        if (self->accept_errors_ > 0) {
          spdlog::info("accept: working again after {} failed attempts",
                       std::exchange(self->accept_errors_, 0));
        }
        // Whatever happens to this connection, the acceptor goes on accepting.
        try {
          self->serve(std::move(s));
        } catch (const std::exception& e) {
          self->io_exception(e.what());
        }
        self->do_accept();
      });
}

void server::serve(worker_socket s) {
  const auto max = svc_.current()->cfg.limits.max_connections;
  if (open_connections() >= max) {
    svc_.stats().connection_rejected();
    if (const auto n = rejected_log_.admit()) {
      spdlog::warn(
          "limits.max_connections ({}) reached: closing new connections ({} since the last report)",
          max, n);
    }
    beast::error_code ignored;
    s.close(ignored);
    return;
  }
  auto sess = std::make_shared<session>(std::move(s), shared_from_this());
  session_started(sess);
  sess->run();
}

std::size_t server::open_connections() {
  std::lock_guard lock(mu_);
  return live_;
}

void server::read_timed_out(std::string_view phase, const std::string& peer) {
  svc_.stats().read_timeout(phase);
  if (const auto n = timeout_log_.admit()) {
    spdlog::info(
        "closed a connection from {}: request {} not received in time ({} since the last report)",
        peer, phase, n);
  }
}

void server::io_exception(const char* what) noexcept {
  try {
    svc_.stats().internal_error("io");
    if (const auto n = io_error_log_.admit()) {
      spdlog::error(
          "internal error in the server: {}; connection closed ({} since the last report)", what,
          n);
    }
  } catch (...) {
  }
}

void server::session_started(const std::shared_ptr<session>& s) {
  std::lock_guard lock(mu_);
  ++live_;
  if (sessions_.size() > 64 && sessions_.size() > 2 * live_) {
    std::erase_if(sessions_, [](const auto& w) { return w.expired(); });
  }
  sessions_.push_back(s);
}

void server::session_ended() {
  bool last = false;
  {
    std::lock_guard lock(mu_);
    --live_;
    last = live_ == 0 && draining();
  }
  if (last) finish_drain();
}

void server::drain(std::chrono::milliseconds deadline, std::function<void()> done) {
  asio::dispatch(acceptor_.get_executor(), [self = shared_from_this(), deadline,
                                            done = std::move(done)]() mutable {
    beast::error_code ec;
    self->acceptor_.close(ec);
    self->accept_pause_.cancel();
    std::vector<std::shared_ptr<session>> open;
    bool none = false;
    {
      std::lock_guard lock(self->mu_);
      self->draining_.store(true, std::memory_order_release);
      self->drained_ = std::move(done);
      for (auto& w : self->sessions_) {
        if (auto s = w.lock()) open.push_back(std::move(s));
      }
      none = self->live_ == 0;
      self->deadline_ = std::make_unique<asio::steady_timer>(self->ioc_, deadline);
      self->deadline_->async_wait([self](beast::error_code e) {
        if (e) return;
        spdlog::warn("drain: deadline passed with connections still open");
        self->finish_drain();
      });
    }
    spdlog::info("draining {} connection(s)", open.size());
    for (auto& s : open) s->close_if_idle();
    open.clear();  // a session may end right here; session_ended then finishes the drain
    if (none) self->finish_drain();
  });
}

void server::finish_drain() {
  std::function<void()> done;
  {
    std::lock_guard lock(mu_);
    done = std::move(drained_);
    drained_ = nullptr;
    if (deadline_) deadline_->cancel();
  }
  if (done) done();
}

}  // namespace sluice::daemon
