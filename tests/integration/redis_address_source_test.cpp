// The connection's address source (src/redis/address_source.hpp) against a real
// redis-server: it is asked on every attempt, an attempt without an address fails fast (the
// breaker) and the next one asks again, a move points the connection elsewhere, and a
// script call's error reply (READONLY from a demoted master) makes the source look again.
// The Sentinel source itself is tested without sockets (tests/unit/sentinel_address_test.cpp)
// and with real sentinels (sentinel_*_test.cpp).
#include <sluice/error.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "redis/address_source.hpp"
#include "redis/connection.hpp"
#include "redis/decide_command.hpp"
#include "redis/engine/script_exec.hpp"
#include "redis/resp.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::redis::address_source;
using sluice::redis::connection;
using sluice::redis::reply_ptr;
using sluice::redis::server_address;
using clock_type = std::chrono::steady_clock;

// Answers `port` once `known`, none before; counts what the connection asks and reports.
class scripted_source final : public address_source {
 public:
  std::atomic<bool> known{false};
  std::atomic<std::uint16_t> port{0};
  std::atomic<int> resolves{0};
  std::atomic<int> suspects{0};
  moved_handler moved;  // I/O thread

  void start(moved_handler m) override { moved = std::move(m); }
  void resolve(resolve_handler done) override {
    ++resolves;
    if (!known) return done(std::nullopt);
    done(server_address{"127.0.0.1", port});
  }
  void suspect() override { ++suspects; }
};

class on_source {
 public:
  explicit on_source(std::shared_ptr<scripted_source> source)
      : source_(std::move(source)), work_(io_.get_executor()) {
    sluice::redis::connection_config c;
    c.address = source_;
    c.command_timeout = 2000ms;
    c.connect_timeout = 1000ms;
    c.backoff_min = 10ms;
    c.backoff_max = 20ms;
    conn_ = std::make_shared<connection>(io_, c);
    conn_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~on_source() {
    conn_->stop();
    work_.reset();
    thread_.join();
  }
  on_source(const on_source&) = delete;
  on_source& operator=(const on_source&) = delete;

  connection& conn() { return *conn_; }
  const std::shared_ptr<connection>& shared() { return conn_; }

  // Runs f on the I/O thread and waits for it.
  void on_io(std::function<void()> f) {
    std::promise<void> done;
    boost::asio::post(io_, [&] {
      f();
      done.set_value();
    });
    done.get_future().get();
  }
  std::pair<std::error_code, std::string> control(std::initializer_list<std::string_view> args) {
    std::string command;
    sluice::redis::append_command(command, args);
    std::promise<std::pair<std::error_code, std::string>> done;
    conn_->async_control(std::move(command), [&done](std::error_code ec, reply_ptr r) {
      done.set_value({ec, r ? std::string(sluice::redis::reply_text(*r)) : std::string()});
    });
    return done.get_future().get();
  }
  bool wait_for(connection::state s, std::chrono::milliseconds within) {
    const auto until = clock_type::now() + within;
    while (conn_->current_state() != s) {
      if (clock_type::now() > until) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }

 private:
  std::shared_ptr<scripted_source> source_;
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<connection> conn_;
  std::thread thread_;
};

TEST(RedisAddressSourceTest, WithoutAnAddressItFailsFastAndAsksAgainOnEveryAttempt) {
  sluice::test::redis_server redis;
  auto source = std::make_shared<scripted_source>();
  source->port = redis.port();
  on_source c(source);
  ASSERT_TRUE(c.wait_for(connection::state::down, 5s));
  EXPECT_EQ(c.control({"PING"}).first, make_error_code(errc::backend_unavailable));
  const int before = source->resolves;
  EXPECT_GE(before, 1);
  source->known = true;
  ASSERT_TRUE(c.wait_for(connection::state::up, 5s));
  EXPECT_GT(source->resolves.load(), before);  // the retry asked again
  EXPECT_EQ(c.control({"PING"}), (std::pair<std::error_code, std::string>{{}, "PONG"}));
}

TEST(RedisAddressSourceTest, AMoveByTheSourcePointsTheConnectionAtTheNewServer) {
  sluice::test::redis_server a, b;
  auto source = std::make_shared<scripted_source>();
  source->port = a.port();
  source->known = true;
  on_source c(source);
  ASSERT_EQ(c.control({"SET", "where", "a"}).first, std::error_code{});
  {
    auto source_b = std::make_shared<scripted_source>();
    source_b->port = b.port();
    source_b->known = true;
    on_source on_b(source_b);
    ASSERT_EQ(on_b.control({"SET", "where", "b"}).first, std::error_code{});
  }
  // What a Sentinel source does when a round names another master.
  source->port = b.port();
  c.on_io([&] { source->moved(server_address{"127.0.0.1", b.port()}); });
  EXPECT_EQ(c.control({"GET", "where"}), (std::pair<std::error_code, std::string>{{}, "b"}));
  EXPECT_EQ(c.conn().current_state(), connection::state::up);
}

// A script call that answers what a demoted master answers.
struct readonly_call {
  std::promise<std::error_code>* done;
  void append(std::string& out, sluice::redis::script_call) const {
    sluice::redis::append_command(
        out, {"EVAL",
              "return redis.error_reply('READONLY You cannot write against a read only replica.')",
              "0"});
  }
  void operator()(std::error_code ec, const reply_ptr& reply) {
    done->set_value(ec ? ec
                       : (sluice::redis::is_error(*reply)
                              ? make_error_code(errc::backend_script_error)
                              : std::error_code{}));
  }
};

TEST(RedisAddressSourceTest, AnErrorReplyToAScriptCallMakesTheSourceLookAgain) {
  sluice::test::redis_server redis;
  auto source = std::make_shared<scripted_source>();
  source->port = redis.port();
  source->known = true;
  on_source c(source);
  ASSERT_EQ(c.control({"PING"}).first, std::error_code{});
  EXPECT_EQ(source->suspects.load(), 0);
  std::promise<std::error_code> done;
  c.on_io([&] {
    sluice::redis::exec_script(c.shared(), {.deadline = clock_type::now() + 2s},
                               readonly_call{&done});
  });
  EXPECT_EQ(done.get_future().get(), make_error_code(errc::backend_script_error));
  EXPECT_EQ(source->suspects.load(), 1);
}

}  // namespace
