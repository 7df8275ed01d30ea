#include "envoy_rls_server.hpp"

#include <openssl/ssl.h>

#include <future>
#include <mutex>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "grpc/h2_connection.hpp"
#include "metrics.hpp"
#include "service.hpp"

namespace sluice::daemon {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// ALPN: HTTP/2 ("h2") when the client offers it. A client that offers only others gets no
// protocol and finds out from the preface; gRPC clients always offer h2.
int select_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
              unsigned int inlen, void*) {
  for (unsigned int i = 0; i < inlen;) {
    const unsigned len = in[i];
    if (i + 1 + len > inlen) break;
    if (len == 2 && in[i + 1] == 'h' && in[i + 2] == '2') {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

// The PEM contents were read and checked when the config loaded (config_yaml.cpp).
std::shared_ptr<asio::ssl::context> tls_context(const envoy_rls_config::tls_config& tls) {
  if (!tls.enabled()) return nullptr;
  auto ctx = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_server);
  // HTTP/2 over TLS requires TLS 1.2 or later (RFC 9113, section 9.2).
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                   asio::ssl::context::no_tlsv1_1);
  ctx->use_certificate_chain(asio::buffer(tls.cert_pem));
  ctx->use_private_key(asio::buffer(tls.key_pem), asio::ssl::context::pem);
  if (!tls.client_ca_pem.empty()) {
    ctx->add_certificate_authority(asio::buffer(tls.client_ca_pem));
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  SSL_CTX_set_alpn_select_cb(ctx->native_handle(), &select_h2, nullptr);
  return ctx;
}

}  // namespace

// Shared with every connection (as their connection_context), so it outlives them.
struct rls_server::listener final : grpc::connection_context,
                                    std::enable_shared_from_this<listener> {
  listener(service& s, asio::io_context& io, std::vector<asio::io_context*> w)
      : connection_context(s, s.current()->cfg.envoy_rls.transport.connection),
        svc(s),
        ioc(io),
        workers(w.empty() ? std::vector<asio::io_context*>{&io} : std::move(w)),
        max_connections(s.current()->cfg.envoy_rls.transport.max_connections),
        acceptor(asio::make_strand(io)),
        accept_pause(acceptor.get_executor()) {}

  service& svc;
  asio::io_context& ioc;
  std::vector<asio::io_context*> workers;
  const std::size_t max_connections;
  std::size_t next_worker = 0;  // acceptor strand only
  tcp::acceptor acceptor;
  asio::steady_timer accept_pause;
  std::shared_ptr<asio::ssl::context> tls;
  log_throttle rejected_log;
  log_throttle accept_log;

  std::mutex mu;
  bool draining = false;
  std::size_t live = 0;
  std::vector<std::weak_ptr<grpc::connection_handle>> connections;
  std::function<void()> drained;
  std::unique_ptr<asio::steady_timer> deadline;

  void do_accept() {
    next_worker = (next_worker + 1) % workers.size();
    acceptor.async_accept(
        workers[next_worker]->get_executor(),
        [self = shared_from_this()](boost::system::error_code ec, grpc::worker_socket s) {
          if (!self->acceptor.is_open()) return;
          if (ec) return self->pause_accepting(ec);
          self->serve(std::move(s));
          self->do_accept();
        });
  }

  // Out of file descriptors, say: try again a little later rather than at once in a loop.
  void pause_accepting(const boost::system::error_code& ec) {
    if (const auto n = accept_log.admit()) {
      spdlog::warn("envoy_rls: accept: {}; pausing accepts for 100 ms ({} in this burst)",
                   ec.message(), n);
    }
    accept_pause.expires_after(std::chrono::milliseconds{100});
    accept_pause.async_wait([self = shared_from_this()](boost::system::error_code e) {
      if (!e && self->acceptor.is_open()) self->do_accept();
    });
  }

  // `mu` is never held where a connection may be destroyed: its destructor takes it
  // (connection_ended), and the last reference may be this thread's when the connection,
  // started on another worker, has already ended.
  void serve(grpc::worker_socket s) {
    bool admitted = false;
    {
      std::lock_guard lock(mu);
      admitted = !draining && live < max_connections;
      if (admitted) ++live;
    }
    if (!admitted) return reject(std::move(s));
    std::shared_ptr<grpc::connection_handle> c;
    try {
      c = grpc::start_connection(std::move(s), tls, shared_from_this());
    } catch (const std::exception& e) {
      svc.stats().internal_error("io");
      spdlog::error("envoy_rls: cannot serve a connection: {}", e.what());
      if (!c) connection_ended();  // never constructed: no destructor will count it
      return;
    }
    bool drain_it = false;
    {
      std::lock_guard lock(mu);
      if (connections.size() > 64 && connections.size() > 2 * live) {
        std::erase_if(connections, [](const auto& w) { return w.expired(); });
      }
      connections.push_back(c);
      drain_it = draining;  // admitted just before the drain began
    }
    if (drain_it) c->drain();
  }

  void reject(grpc::worker_socket s) {
    svc.stats().connection_rejected();
    if (const auto n = rejected_log.admit()) {
      spdlog::warn(
          "envoy_rls.max_connections ({}) reached: closing new gRPC connections ({} since the "
          "last report)",
          max_connections, n);
    }
    boost::system::error_code ignored;
    s.close(ignored);
  }

  void connection_ended() noexcept override {
    bool last = false;
    {
      std::lock_guard lock(mu);
      --live;
      last = live == 0 && draining;
    }
    if (last) finish_drain();
  }

  void finish_drain() {
    std::function<void()> done;
    {
      std::lock_guard lock(mu);
      done = std::move(drained);
      drained = nullptr;
      if (deadline) deadline->cancel();
    }
    if (done) asio::post(ioc, std::move(done));
  }

  // On the acceptor's strand.
  void start_drain(std::chrono::milliseconds within, std::function<void()> done) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    accept_pause.cancel();
    calls.set_draining();
    std::vector<std::shared_ptr<grpc::connection_handle>> open;
    bool none = false;
    {
      std::lock_guard lock(mu);
      draining = true;
      drained = std::move(done);
      for (auto& w : connections) {
        if (auto c = w.lock()) open.push_back(std::move(c));
      }
      none = live == 0;
      deadline = std::make_unique<asio::steady_timer>(ioc, within);
      deadline->async_wait([self = shared_from_this()](boost::system::error_code e) {
        if (e) return;
        spdlog::warn("envoy_rls drain: deadline passed with gRPC connections still open");
        self->close_all();
        self->finish_drain();
      });
    }
    for (auto& c : open) c->drain();
    open.clear();  // a connection may end right here; connection_ended finishes the drain
    if (none) finish_drain();
  }

  void close_all() {
    std::vector<std::shared_ptr<grpc::connection_handle>> open;
    {
      std::lock_guard lock(mu);
      for (auto& w : connections) {
        if (auto c = w.lock()) open.push_back(std::move(c));
      }
    }
    for (auto& c : open) c->close();
  }
};

rls_server::rls_server(service& svc, asio::io_context& ioc, std::vector<asio::io_context*> workers)
    : impl_(std::make_shared<listener>(svc, ioc, std::move(workers))) {}

// The connections (and handlers still queued on the io_contexts) hold the listener: it
// goes with the last of them, never under one.
rls_server::~rls_server() {
  asio::post(impl_->acceptor.get_executor(), [l = impl_] {
    boost::system::error_code ignored;
    l->acceptor.close(ignored);
    l->accept_pause.cancel();
  });
}

std::uint16_t rls_server::start(const std::string& host, std::uint16_t port,
                                const envoy_rls_config::tls_config& tls) {
  auto& l = *impl_;
  l.tls = tls_context(tls);
  try {
    const tcp::endpoint ep{asio::ip::make_address(host), port};
    l.acceptor.open(ep.protocol());
    l.acceptor.set_option(asio::socket_base::reuse_address(true));
    l.acceptor.bind(ep);
    l.acceptor.listen(asio::socket_base::max_listen_connections);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
  const auto bound = l.acceptor.local_endpoint().port();
  asio::dispatch(l.acceptor.get_executor(), [self = impl_] { self->do_accept(); });
  return bound;
}

void rls_server::drain(std::chrono::milliseconds deadline, std::function<void()> done) {
  asio::dispatch(impl_->acceptor.get_executor(),
                 [self = impl_, deadline, done = std::move(done)]() mutable {
                   self->start_drain(deadline, std::move(done));
                 });
}

void rls_server::shutdown(std::chrono::milliseconds deadline) {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->draining) return;
  }
  auto finished = std::make_shared<std::promise<void>>();
  auto f = finished->get_future();
  drain(deadline, [finished] { finished->set_value(); });
  f.wait_for(deadline + std::chrono::seconds{1});
}

}  // namespace sluice::daemon
