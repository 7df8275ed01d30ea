// A real Boost.Beast server (one io_context thread, a strand per connection, as
// examples/beast) whose concurrency rules go through async_enter_concurrency and whose
// sessions hold the gate_pass until the response's async_write completes: a second request
// is refused while the first one's response is not yet written (or, with a max_wait, waits
// for it while the same thread keeps serving other requests), and gets the slot once that
// write completed. Blocking Beast clients on the test's threads; waits poll a condition
// against a deadline.
#include <sluice/http/beast.hpp>
#include <sluice/http/concurrency_gate.hpp>
#include <sluice/limiter.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace sh = sluice::http;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

template <class F>
bool eventually(std::chrono::milliseconds within, F&& ok) {
  const auto deadline = steady::now() + within;
  for (;;) {
    if (ok()) return true;
    if (steady::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// The server: GET /reports/slow is answered only when the test calls answer_slow(); every
// other path at once.
class server {
 public:
  explicit server(std::chrono::milliseconds max_wait) {
    sh::rule r;
    r.name = "reports";
    r.match.path_prefix = "/reports/";
    r.key = *sh::key_spec::parse("ip");
    r.policy = "reports";
    r.max_wait = max_wait;
    rules_ = std::make_shared<const sh::rule_set>(
        std::map<std::string, sluice::policy, std::less<>>{},
        std::map<std::string, sluice::concurrency_policy, std::less<>>{
            {"reports", {.limit = 1, .lease_ttl = 60s}}},
        std::vector<sh::rule>{r});
    acceptor_.open(tcp::v4());
    acceptor_.bind({net::ip::make_address("127.0.0.1"), 0});
    acceptor_.listen();
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~server() {
    net::post(io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
      parked_.clear();
    });
    io_.stop();
    thread_.join();
  }

  unsigned short port() const { return acceptor_.local_endpoint().port(); }
  sluice::limiter& lim() { return lim_; }
  // Writes the parked slow responses (on the io thread).
  void answer_slow() {
    net::post(io_, [this] {
      auto parked = std::move(parked_);
      for (auto& f : parked) f();
    });
  }
  std::atomic<int> parked{0};

 private:
  class session : public std::enable_shared_from_this<session> {
   public:
    session(tcp::socket s, server& srv) : stream_(std::move(s)), srv_(srv) {}
    void read() {
      req_ = {};
      bhttp::async_read(stream_, buffer_, req_,
                        beast::bind_front_handler(&session::on_read, shared_from_this()));
    }

   private:
    void on_read(beast::error_code ec, std::size_t) {
      if (ec) return;
      beast::error_code pec;
      const auto peer = stream_.socket().remote_endpoint(pec).address();
      if (pec) return;
      facts_ = sh::beast::make_request_facts(req_, peer);
      sh::async_enter_concurrency(
          srv_.lim_, *srv_.rules_, facts_, 503,
          net::bind_executor(stream_.get_executor(),
                             [self = shared_from_this()](std::error_code, sh::gate_pass pass) {
                               self->on_entered(std::move(pass));
                             }));
    }

    void on_entered(sh::gate_pass pass) {
      if (!pass.admitted()) return write(sh::beast::make_denial(req_, pass.response()), {});
      bhttp::response<bhttp::string_body> res{bhttp::status::ok, req_.version()};
      res.body() = "ok";
      res.prepare_payload();
      if (req_.target() != "/reports/slow") return write(std::move(res), std::move(pass));
      auto held = std::make_shared<sh::gate_pass>(std::move(pass));
      auto r = std::make_shared<bhttp::response<bhttp::string_body>>(std::move(res));
      srv_.parked_.push_back([self = shared_from_this(), held, r] {
        net::dispatch(self->stream_.get_executor(),
                      [self, held, r] { self->write(std::move(*r), std::move(*held)); });
      });
      srv_.parked.fetch_add(1);
    }

    // The pass is held until the write completed, then given back.
    void write(bhttp::response<bhttp::string_body> res, sh::gate_pass pass) {
      auto sp = std::make_shared<bhttp::response<bhttp::string_body>>(std::move(res));
      auto held = std::make_shared<sh::gate_pass>(std::move(pass));
      bhttp::async_write(stream_, *sp,
                         [self = shared_from_this(), sp, held](beast::error_code ec, std::size_t) {
                           held->release();
                           if (!ec) self->read();
                         });
    }

    beast::tcp_stream stream_;
    server& srv_;
    beast::flat_buffer buffer_;
    bhttp::request<bhttp::string_body> req_;
    sh::request_facts facts_;
  };

  void accept() {
    acceptor_.async_accept(net::make_strand(io_), [this](beast::error_code ec, tcp::socket s) {
      if (ec) return;
      std::make_shared<session>(std::move(s), *this)->read();
      accept();
    });
  }

  net::io_context io_{1};
  tcp::acceptor acceptor_{io_};
  sluice::limiter lim_ = sluice::limiter::in_memory();
  std::shared_ptr<const sh::rule_set> rules_;
  std::vector<std::function<void()>> parked_;  // the io thread's only
  std::thread thread_;
};

// A blocking client connection.
struct client {
  net::io_context io;
  beast::tcp_stream stream{io};
  explicit client(unsigned short port) {
    stream.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    stream.expires_after(30s);  // a hung server fails the test instead of hanging it
  }
  void send(const std::string& target) {
    bhttp::request<bhttp::empty_body> req{bhttp::verb::get, target, 11};
    req.set(bhttp::field::host, "localhost");
    bhttp::write(stream, req);
  }
  bhttp::response<bhttp::string_body> receive() {
    beast::flat_buffer buf;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(stream, buf, res);
    return res;
  }
  bhttp::response<bhttp::string_body> get(const std::string& target) {
    send(target);
    return receive();
  }
};

TEST(HttpBeastConcurrencyTest, TheSlotIsHeldUntilTheResponseIsWritten) {
  server srv(0ms);
  client a(srv.port());
  a.send("/reports/slow");
  ASSERT_TRUE(eventually(10s, [&] { return srv.parked.load() == 1; }));

  client b(srv.port());
  const auto refused = b.get("/reports/fast");
  EXPECT_EQ(refused.result_int(), 503u) << "the slot is held while A's response is unwritten";
  EXPECT_FALSE(refused[bhttp::field::retry_after].empty());
  EXPECT_EQ(refused[bhttp::field::content_type], "application/problem+json");
  EXPECT_EQ(b.get("/other").result_int(), 200u) << "no rule matches";

  srv.answer_slow();
  EXPECT_EQ(a.receive().result_int(), 200u);
  // The slot goes back once A's async_write completed (the server's thread, after the
  // bytes left): B's next request finds it free.
  ASSERT_TRUE(eventually(10s, [&] { return srv.lim().slot_stats().released >= 1; }));
  EXPECT_EQ(b.get("/reports/fast").result_int(), 200u);
}

TEST(HttpBeastConcurrencyTest, AWaitingRequestIsServedOnceTheHoldersResponseIsWritten) {
  server srv(30s);
  client a(srv.port());
  a.send("/reports/slow");
  ASSERT_TRUE(eventually(10s, [&] { return srv.parked.load() == 1; }));

  const auto refused = srv.lim().slot_stats().refused;
  client b(srv.port());
  b.send("/reports/fast");
  auto waiting = std::async(std::launch::async, [&] { return b.receive(); });
  ASSERT_TRUE(eventually(10s, [&] { return srv.lim().slot_stats().refused > refused; }))
      << "B's first attempt";
  // B waits for the slot; the server's one thread still answers others meanwhile.
  client c(srv.port());
  EXPECT_EQ(c.get("/other").result_int(), 200u);
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout) << "B waits, not refused";

  srv.answer_slow();
  EXPECT_EQ(a.receive().result_int(), 200u);
  EXPECT_EQ(waiting.get().result_int(), 200u) << "served by A's release, within max_wait";
  EXPECT_EQ(srv.lim().slot_stats().acquired, 2u);
}

}  // namespace
