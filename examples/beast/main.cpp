// A small Boost.Beast server rate-limited by Sluice's middleware core, the shape of the
// Beast server examples: a listener, a session per connection on its own strand, timeouts,
// and a signal_set for a clean shutdown. Each request is evaluated with async_evaluate, then
// takes its concurrency slots with async_enter_concurrency (held until its response has
// been written), so no thread blocks on the backend (Redis) while deciding or waiting.
//
//   sluice_example_beast [--port 8082] [--backend memory|redis://127.0.0.1:6379]
//                        [--trust CIDR]... [--threads N]
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <sluice/http/beast.hpp>
#include <sluice/http/middleware.hpp>
#include <sluice/sluice.hpp>

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

namespace {

struct options {
  unsigned short port = 8082;
  std::string backend = "memory";
  std::vector<std::string> trusted;
  int threads = 2;
};

[[noreturn]] void usage(int code) {
  (code ? std::cerr : std::cout)
      << "usage: sluice_example_beast [--port N] [--backend memory|redis://HOST:PORT] "
         "[--trust CIDR]... [--threads N]\n"
         "  --trust CIDR  believe X-Forwarded-For from peers in CIDR (repeatable)\n";
  std::exit(code);
}

options parse_args(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--port") {
      const int p = std::atoi(value().c_str());
      if (p <= 0 || p > 65535) usage(2);
      o.port = static_cast<unsigned short>(p);
    } else if (a == "--backend") {
      o.backend = value();
    } else if (a == "--trust") {
      o.trusted.push_back(value());
    } else if (a == "--threads") {
      o.threads = std::atoi(value().c_str());
      if (o.threads < 1 || o.threads > 64) usage(2);
    } else if (a == "--help" || a == "-h") {
      usage(0);
    } else {
      usage(2);
    }
  }
  return o;
}

sluice::policy bucket(std::uint64_t capacity, double refill_per_second) {
  sluice::policy p;
  p.capacity = capacity;
  p.refill_per_second = refill_per_second;
  return p;
}

sluice::http::rule make_rule(std::string name, std::string prefix, std::string_view key,
                             std::string policy, bool shadow = false,
                             std::vector<std::string> methods = {}) {
  sluice::http::rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.match.methods = std::move(methods);
  r.key = *sluice::http::key_spec::parse(key);
  r.policy = std::move(policy);
  r.shadow = shadow;
  return r;
}

sluice::http::rule make_slot_rule(std::string name, std::string prefix, std::string policy,
                                  std::chrono::milliseconds max_wait) {
  auto r = make_rule(std::move(name), std::move(prefix), "ip", std::move(policy));
  r.max_wait = max_wait;
  return r;
}

// What every session shares: the limiter and the (immutable) rules.
struct app {
  sluice::limiter limiter;
  std::shared_ptr<const sluice::http::rule_set> rules;
};

// The application's own routes, reached only when the middleware allowed the request.
bhttp::response<bhttp::string_body> route(const bhttp::request<bhttp::string_body>& req) {
  bhttp::response<bhttp::string_body> res{bhttp::status::ok, req.version()};
  res.keep_alive(req.keep_alive());
  const auto target = req.target();
  if (req.method() == bhttp::verb::get && target.starts_with("/api/hello")) {
    res.set(bhttp::field::content_type, "application/json");
    res.body() = "{\"hello\":\"world\"}\n";
  } else if (req.method() == bhttp::verb::get && target.starts_with("/reports/")) {
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = "report\n";
  } else if (req.method() == bhttp::verb::post && target == "/login") {
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = "welcome\n";
  } else if (req.method() == bhttp::verb::get && target == "/") {
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = "home (only a shadow rule applies here)\n";
  } else {
    res.result(bhttp::status::not_found);
    res.set(bhttp::field::content_type, "text/plain");
    res.body() = "not found\n";
  }
  res.prepare_payload();
  return res;
}

class session : public std::enable_shared_from_this<session> {
 public:
  session(tcp::socket&& socket, std::shared_ptr<app> a)
      : stream_(std::move(socket)), app_(std::move(a)) {}

  void run() {
    // Everything of this session runs on its strand (the socket's executor).
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&session::read, shared_from_this()));
  }

 private:
  void read() {
    req_ = {};
    stream_.expires_after(std::chrono::seconds(30));
    bhttp::async_read(stream_, buffer_, req_,
                      beast::bind_front_handler(&session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == bhttp::error::end_of_stream) return close();
    if (ec) return;
    beast::error_code peer_ec;
    const auto peer = stream_.socket().remote_endpoint(peer_ec).address();
    if (peer_ec) return close();
    // The facts refer to req_, which stays untouched until the response is written.
    facts_ = sluice::http::beast::make_request_facts(req_, peer);
    sluice::http::async_evaluate(
        app_->limiter, app_->rules, facts_,
        net::bind_executor(stream_.get_executor(),
                           [self = shared_from_this()](sluice::http::evaluation e) {
                             self->on_decided(std::move(e));
                           }));
  }

  void on_decided(sluice::http::evaluation e) {
    auto r = sluice::http::make_response(e);
    if (!r.allowed) return write(sluice::http::beast::make_denial(req_, r));
    // The rate rules allowed it: now the concurrency rules' slots (503 when one is full,
    // after its max_wait), taken without blocking this strand's thread.
    sluice::http::async_enter_concurrency(
        app_->limiter, *app_->rules, facts_, 503,
        net::bind_executor(stream_.get_executor(),
                           [self = shared_from_this(), r = std::move(r)](
                               std::error_code, sluice::http::gate_pass pass) {
                             self->on_entered(r, std::move(pass));
                           }));
  }

  void on_entered(const sluice::http::rate_limit_response& r, sluice::http::gate_pass pass) {
    if (!pass.admitted()) return write(sluice::http::beast::make_denial(req_, pass.response()));
    auto res = route(req_);
    sluice::http::beast::set_headers(res, r.headers);
    write(std::move(res), std::move(pass));
  }

  // Writes `res`; `pass` (the request's slots) is held until the write completed.
  void write(bhttp::response<bhttp::string_body> res, sluice::http::gate_pass pass = {}) {
    auto sp = std::make_shared<bhttp::response<bhttp::string_body>>(std::move(res));
    auto held = std::make_shared<sluice::http::gate_pass>(std::move(pass));
    bhttp::async_write(stream_, *sp,
                       [self = shared_from_this(), sp, held](beast::error_code ec, std::size_t) {
                         held->release();  // the response is out (or failed): slots back
                         if (ec) return;
                         if (sp->need_eof()) return self->close();
                         self->read();
                       });
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bhttp::request<bhttp::string_body> req_;
  sluice::http::request_facts facts_;
  std::shared_ptr<app> app_;
};

class listener : public std::enable_shared_from_this<listener> {
 public:
  listener(net::io_context& io, tcp::endpoint ep, std::shared_ptr<app> a)
      : io_(io), acceptor_(net::make_strand(io)), app_(std::move(a)) {
    acceptor_.open(ep.protocol());
    acceptor_.set_option(net::socket_base::reuse_address(true));
    acceptor_.bind(ep);
    acceptor_.listen(net::socket_base::max_listen_connections);
  }

  void run() { accept(); }
  void stop() {
    beast::error_code ec;
    acceptor_.close(ec);
  }

 private:
  void accept() {
    acceptor_.async_accept(net::make_strand(io_),
                           [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
                             if (ec == net::error::operation_aborted) return;
                             if (!ec) std::make_shared<session>(std::move(s), self->app_)->run();
                             self->accept();
                           });
  }

  net::io_context& io_;
  tcp::acceptor acceptor_;
  std::shared_ptr<app> app_;
};

}  // namespace

int main(int argc, char** argv) {
  const auto opts = parse_args(argc, argv);

  sluice::http::key_options keys;
  for (const auto& text : opts.trusted) {
    std::string why;
    auto range = sluice::http::parse_cidr(text, &why);
    if (!range) {
      std::cerr << "--trust " << why << "\n";
      return 2;
    }
    keys.trusted_proxies.push_back(*range);
  }
  auto shared = std::make_shared<app>(
      app{sluice::limiter_from_url(opts.backend),
          std::make_shared<const sluice::http::rule_set>(
              std::map<std::string, sluice::policy, std::less<>>{
                  {"api", bucket(5, 1)}, {"login", bucket(3, 0.1)}, {"site", bucket(100, 10)}},
              std::map<std::string, sluice::concurrency_policy, std::less<>>{
                  {"reports", {.limit = 2, .lease_ttl = std::chrono::seconds{30}}}},
              std::vector<sluice::http::rule>{
                  make_slot_rule("reports", "/reports/", "reports", std::chrono::seconds{2}),
                  make_rule("login", "/login", "ip", "login", false, {"POST"}),
                  make_rule("api", "/api/", "header:X-API-Key|ip", "api"),
                  make_rule("everything", "/", "ip", "site", /*shadow=*/true)},
              keys)});

  net::io_context io{opts.threads};
  std::shared_ptr<listener> l;
  try {
    l = std::make_shared<listener>(io, tcp::endpoint{net::ip::make_address("127.0.0.1"), opts.port},
                                   shared);
  } catch (const std::exception& e) {
    std::cerr << "cannot listen on 127.0.0.1:" << opts.port << ": " << e.what() << "\n";
    return 1;
  }
  l->run();

  net::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](beast::error_code, int) {
    // Stop accepting; open connections finish their current exchange, then io.run() ends
    // once the keep-alive timeouts expire, so stop the context for a prompt exit.
    l->stop();
    io.stop();
  });

  const auto base = "http://127.0.0.1:" + std::to_string(opts.port);
  std::cout << "sluice Beast example on " << base << " (backend " << opts.backend << ", "
            << opts.threads << " threads)\n"
            << "  api:   5 requests burst, 1/s per X-API-Key (or per IP without one)\n"
            << "  login: 3 attempts burst, 1 per 10 s per IP (POST /login)\n"
            << "  reports: 2 in flight per IP (GET /reports/...), a third waits up to 2 s\n"
            << "Try:\n"
            << "  for i in $(seq 7); do curl -s -o /dev/null -w '%{http_code}\\n' " << base
            << "/api/hello; done\n"
            << "  curl -i -H 'X-API-Key: demo' " << base << "/api/hello\n"
            << "  for i in 1 2 3 4; do curl -si -d user=me " << base << "/login | head -1; done\n"
            << std::flush;

  std::vector<std::thread> pool;
  for (int i = 1; i < opts.threads; ++i) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  return 0;
}
