#include "envoy_rls_server.hpp"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <sys/stat.h>

#include <array>
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
#include "pem_file.hpp"
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

// How often the listener looks at its TLS files for a new certificate (a rotation by
// cert-manager or a Kubernetes secret swaps them while sluiced runs).
constexpr std::chrono::seconds tls_watch_interval{2};

// A TLS context and what its verification reads: connections hold the whole of it (their
// SSL objects point into it), so a reload can put another in force under them.
struct tls_state {
  asio::ssl::context ctx{asio::ssl::context::tls_server};
  std::string client_san;
};

// The index of the SSL_CTX slot that points at its tls_state's client_san.
int san_slot() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL's verification of the client's chain, plus the reference's GRPC_CLIENT_TLS_SAN:
// the client certificate itself (depth 0) must carry the configured name, or the handshake
// fails.
int verify_client(int preverified, X509_STORE_CTX* store) {
  if (!preverified) return 0;
  if (X509_STORE_CTX_get_error_depth(store) != 0) return 1;
  auto* ssl =
      static_cast<SSL*>(X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()));
  const auto* san =
      ssl ? static_cast<const std::string*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), san_slot()))
          : nullptr;
  if (!san || san->empty()) return 1;
  if (certificate_has_san(X509_STORE_CTX_get_current_cert(store), *san)) return 1;
  X509_STORE_CTX_set_error(store, X509_V_ERR_HOSTNAME_MISMATCH);
  return 0;
}

// A server context from PEM contents (checked when the config loaded, or just now by the
// watcher). Throws when OpenSSL refuses them.
std::shared_ptr<asio::ssl::context> tls_context(const envoy_rls_config::tls_config& tls) {
  if (!tls.enabled()) return nullptr;
  auto state = std::make_shared<tls_state>();
  auto& ctx = state->ctx;
  // HTTP/2 over TLS requires TLS 1.2 or later (RFC 9113, section 9.2).
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                  asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                  asio::ssl::context::no_tlsv1_1);
  ctx.use_certificate_chain(asio::buffer(tls.cert_pem));
  ctx.use_private_key(asio::buffer(tls.key_pem), asio::ssl::context::pem);
  if (!tls.client_ca_pem.empty()) {
    ctx.add_certificate_authority(asio::buffer(tls.client_ca_pem));
    state->client_san = tls.client_san;
    SSL_CTX_set_ex_data(ctx.native_handle(), san_slot(), &state->client_san);
    // OpenSSL's own callback, not asio's: asio keeps its callbacks in the asio context,
    // which a connection's SSL object must not depend on.
    SSL_CTX_set_verify(ctx.native_handle(), SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT,
                       &verify_client);
  }
  SSL_CTX_set_alpn_select_cb(ctx.native_handle(), &select_h2, nullptr);
  return {state, &state->ctx};
}

// What identifies a version of a file on disk: a rename or a rewrite changes it.
struct file_stamp {
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const file_stamp&) const = default;
};

file_stamp stamp_of(const std::string& path) {
  file_stamp f;
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return f;
  f.exists = true;
  f.dev = st.st_dev;
  f.ino = st.st_ino;
  f.size = st.st_size;
  f.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
  return f;
}

using tls_stamps = std::array<file_stamp, 3>;

tls_stamps stamps_of(const envoy_rls_config::tls_config& tls) {
  return {stamp_of(tls.cert_path), stamp_of(tls.key_path), stamp_of(tls.client_ca_path)};
}

// The files of `tls` read again, as the config load checks them; false (and `why`) when
// one is unreadable, not PEM, or the key is not the certificate's.
bool reread(envoy_rls_config::tls_config& tls, std::string& why) {
  auto read = [&](const std::string& path, pem_kind kind, const char* field, std::string& out) {
    if (path.empty()) return true;
    auto text = read_pem_file(path, kind, why);
    if (!text) {
      why = std::string(field) + ": " + why;
      return false;
    }
    out = std::move(*text);
    return true;
  };
  if (!read(tls.cert_path, pem_kind::certificates, "cert_file", tls.cert_pem) ||
      !read(tls.key_path, pem_kind::private_key, "key_file", tls.key_pem) ||
      !read(tls.client_ca_path, pem_kind::certificates, "client_ca_file", tls.client_ca_pem))
    return false;
  if (!pem_key_matches(tls.cert_pem, tls.key_pem)) {
    why = "key_file is not the private key of cert_file's certificate";
    return false;
  }
  return true;
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
        accept_pause(acceptor.get_executor()),
        tls_watch(io) {}

  service& svc;
  asio::io_context& ioc;
  std::vector<asio::io_context*> workers;
  const std::size_t max_connections;
  std::size_t next_worker = 0;  // acceptor strand only
  tcp::acceptor acceptor;
  asio::steady_timer accept_pause;
  asio::steady_timer tls_watch;  // on `ioc`, as reload_tls
  // The TLS in force (null: plaintext) and the config and file versions it was made from;
  // replaced by a reload or by the watcher, read for each new connection.
  std::mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls;
  envoy_rls_config::tls_config tls_cfg;
  tls_stamps tls_seen;
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
    std::shared_ptr<asio::ssl::context> ctx;
    {
      std::lock_guard lock(tls_mu);
      ctx = tls;
    }
    std::shared_ptr<grpc::connection_handle> c;
    try {
      c = grpc::start_connection(std::move(s), std::move(ctx), shared_from_this());
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

  // Puts `cfg`'s credentials in force for the next connections (those open keep theirs).
  // False, with the old ones kept, when OpenSSL refuses them. On `ioc`.
  bool use_tls(const envoy_rls_config::tls_config& cfg, const tls_stamps& seen, std::string& why) {
    std::shared_ptr<asio::ssl::context> next;
    try {
      next = tls_context(cfg);
    } catch (const std::exception& e) {
      why = e.what();
      std::lock_guard lock(tls_mu);
      tls_seen = seen;  // not tried again until a file changes again
      return false;
    }
    std::lock_guard lock(tls_mu);
    tls.swap(next);
    tls_cfg = cfg;
    tls_seen = seen;
    return true;  // the old context goes outside the lock, with the last connection using it
  }

  // Every tls_watch_interval: a TLS file that changed on disk is read again, and the new
  // credentials are used when they are whole (a certificate with its key); otherwise the
  // old ones keep serving and the error is logged, once per change.
  void watch_tls() {
    tls_watch.expires_after(tls_watch_interval);
    tls_watch.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      {
        std::lock_guard lock(self->mu);
        if (self->draining) return;  // no new connection will use a new certificate
      }
      self->check_tls_files();
      self->watch_tls();
    });
  }

  void check_tls_files() {
    envoy_rls_config::tls_config cfg;
    tls_stamps before;
    {
      std::lock_guard lock(tls_mu);
      if (!tls) return;
      cfg = tls_cfg;
      before = tls_seen;
    }
    // Stamped before reading: a write after the read is seen at the next look.
    const auto now = stamps_of(cfg);
    if (now == before) return;
    std::string why;
    if (!reread(cfg, why) || !use_tls(cfg, now, why)) {
      {
        std::lock_guard lock(tls_mu);
        tls_seen = now;
      }
      spdlog::error(
          "envoy_rls.tls: the files changed but cannot be used ({}); the previous "
          "certificate keeps serving",
          why);
      return;
    }
    spdlog::info("envoy_rls.tls: files changed; new connections use {}", cfg.cert_file);
  }

  // On the acceptor's strand.
  void start_drain(std::chrono::milliseconds within, std::function<void()> done) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    accept_pause.cancel();
    asio::post(ioc, [self = shared_from_this()] { self->tls_watch.cancel(); });
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
  {
    std::lock_guard lock(l.tls_mu);
    l.tls = tls_context(tls);
    l.tls_cfg = tls;
    l.tls_seen = stamps_of(tls);
  }
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
  if (tls.enabled()) asio::post(l.ioc, [self = impl_] { self->watch_tls(); });
  return bound;
}

bool rls_server::reload_tls(const envoy_rls_config::tls_config& tls) {
  auto& l = *impl_;
  bool was_tls = false;
  bool same = false;
  {
    std::lock_guard lock(l.tls_mu);
    was_tls = l.tls != nullptr;
    const auto& now = l.tls_cfg;
    same = now.cert_path == tls.cert_path && now.key_path == tls.key_path &&
           now.client_ca_path == tls.client_ca_path && now.cert_pem == tls.cert_pem &&
           now.key_pem == tls.key_pem && now.client_ca_pem == tls.client_ca_pem &&
           now.client_san == tls.client_san;
  }
  if (was_tls != tls.enabled()) {
    spdlog::warn("reload: envoy_rls.tls turned {} only on restart; the gRPC listener stays {}",
                 tls.enabled() ? "on" : "off", was_tls ? "TLS" : "plaintext");
    return false;
  }
  if (!was_tls || same) return true;  // nothing new: the context in force stays
  std::string why;
  if (!l.use_tls(tls, stamps_of(tls), why)) {
    spdlog::error(
        "reload: envoy_rls.tls cannot be used ({}); the previous certificate keeps "
        "serving",
        why);
    return false;
  }
  spdlog::info("reload: envoy_rls.tls in force for new connections ({})", tls.cert_file);
  return true;
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
