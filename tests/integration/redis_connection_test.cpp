// The connection's deadlines against a real redis-server (src/redis/connection.hpp): a
// request carries its caller's deadline, so one that runs out fails on its own, and is not
// sent at all when it has run out already; only a request written a whole command timeout
// ago and still unanswered makes the connection count as stuck and reconnect.
#include <sluice/error.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "redis/connection.hpp"
#include "redis/resp.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::redis::connection;
using sluice::redis::reply_ptr;
using clock_type = std::chrono::steady_clock;

struct outcome {
  std::error_code ec;
  reply_ptr reply;
  clock_type::duration took{};
};

// One connection on its own I/O thread.
class connected {
 public:
  connected(const sluice::test::redis_server& redis, std::chrono::milliseconds command_timeout)
      : work_(io_.get_executor()) {
    sluice::redis::connection_config c;
    c.port = redis.port();
    c.command_timeout = command_timeout;
    c.connect_timeout = 1000ms;
    c.backoff_min = 10ms;
    c.backoff_max = 50ms;
    conn_ = std::make_shared<connection>(io_, c);
    conn_->start();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~connected() {
    conn_->stop();
    work_.reset();
    thread_.join();
  }
  connected(const connected&) = delete;
  connected& operator=(const connected&) = delete;

  connection& conn() { return *conn_; }
  boost::asio::io_context& io() { return io_; }

  // Sends `args` with the deadline `deadline` on the data path (from the I/O thread, as
  // the connection's queue of script calls does) and waits for the outcome.
  outcome exec_until(clock_type::time_point deadline,
                     std::initializer_list<std::string_view> args) {
    std::string command;
    sluice::redis::append_command(command, args);
    std::promise<outcome> done;
    const auto t0 = clock_type::now();
    boost::asio::post(io_, [&, deadline, command = std::move(command)]() mutable {
      conn_->exec_on_io_thread(deadline, std::move(command),
                               [&done, t0](std::error_code ec, reply_ptr r) {
                                 done.set_value({ec, std::move(r), clock_type::now() - t0});
                               });
    });
    return done.get_future().get();
  }
  // Sends `args` on the control path (from this thread) and waits for the outcome.
  outcome control(std::initializer_list<std::string_view> args) {
    std::string command;
    sluice::redis::append_command(command, args);
    std::promise<outcome> done;
    conn_->async_control(std::move(command), [&done](std::error_code ec, reply_ptr r) {
      done.set_value({ec, std::move(r), {}});
    });
    return done.get_future().get();
  }
  outcome exec(std::initializer_list<std::string_view> args) {
    return exec_until(clock_type::now() + 5s, args);
  }
  // CLIENT ID (on the control path): the same number means the same TCP connection; -1 on
  // an error.
  long long client_id() {
    auto o = control({"CLIENT", "ID"});
    return !o.ec && o.reply && o.reply->type == REDIS_REPLY_INTEGER ? o.reply->integer : -1;
  }

 private:
  boost::asio::io_context io_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::shared_ptr<connection> conn_;
  std::thread thread_;
};

long long ms(clock_type::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

TEST(RedisConnectionTest, ARequestPastItsOwnDeadlineFailsAloneAndTheConnectionStays) {
  sluice::test::redis_server redis;
  connected c(redis, 3000ms);
  const long long id = c.client_id();
  ASSERT_GT(id, 0);
  redis.pause();
  // Written at once, unanswered past its own (short) deadline: it fails then, and the
  // connection, not unanswered for a command timeout yet, is kept.
  const auto late = c.exec_until(clock_type::now() + 100ms, {"PING"});
  std::this_thread::sleep_for(200ms);
  redis.resume();
  EXPECT_EQ(late.ec, make_error_code(errc::backend_timeout));
  EXPECT_GE(ms(late.took), 90);
  EXPECT_LT(ms(late.took), 2000);
  // Its reply arrives after the resume and is dropped; the next request gets its own.
  EXPECT_EQ(c.client_id(), id);
  EXPECT_EQ(c.conn().current_state(), connection::state::up);
}

TEST(RedisConnectionTest, AnUnansweredRequestMakesTheConnectionStuckAfterACommandTimeout) {
  sluice::test::redis_server redis;
  connected c(redis, 400ms);
  const long long id = c.client_id();
  ASSERT_GT(id, 0);
  redis.pause();
  const auto t0 = clock_type::now();
  const auto late = c.exec_until(t0 + 50ms, {"PING"});
  EXPECT_EQ(late.ec, make_error_code(errc::backend_timeout));
  EXPECT_EQ(c.conn().current_state(), connection::state::up);  // 50 ms: not stuck yet
  // A command timeout after the write, the connection is given up and re-made.
  while (c.conn().current_state() == connection::state::up && clock_type::now() - t0 < 5s) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_NE(c.conn().current_state(), connection::state::up);
  EXPECT_GE(ms(clock_type::now() - t0), 350);
  redis.resume();
  long long again = -1;
  for (int i = 0; i < 200 && again <= 0; ++i) {
    again = c.client_id();
    if (again <= 0) std::this_thread::sleep_for(10ms);
  }
  EXPECT_GT(again, id);  // a new connection
}

// A request whose deadline has passed before it could be written is failed, not sent: it
// would only spend Redis's time on an answer nobody waits for.
TEST(RedisConnectionTest, ARequestPastItsDeadlineIsNotSent) {
  sluice::test::redis_server redis;
  connected c(redis, 1000ms);
  ASSERT_GT(c.client_id(), 0);
  const auto from_caller = c.exec_until(clock_type::now() - 1ms, {"INCR", "late:caller"});
  EXPECT_EQ(from_caller.ec, make_error_code(errc::backend_timeout));

  std::promise<std::error_code> done;
  boost::asio::post(c.io(), [&] {
    std::string command;
    sluice::redis::append_command(command, {"INCR", "late:io"});
    c.conn().exec_on_io_thread(clock_type::now() - 1ms, std::move(command),
                               [&done](std::error_code ec, reply_ptr) { done.set_value(ec); });
  });
  EXPECT_EQ(done.get_future().get(), make_error_code(errc::backend_timeout));

  for (const char* key : {"late:caller", "late:io"}) {
    auto o = c.exec({"EXISTS", key});
    ASSERT_FALSE(o.ec);
    ASSERT_TRUE(o.reply);
    EXPECT_EQ(o.reply->integer, 0) << key;
  }
}

// From the I/O thread, a request joins the write queue directly and completes as any other.
TEST(RedisConnectionTest, ExecOnTheIoThreadIsAnsweredInOrder) {
  sluice::test::redis_server redis;
  connected c(redis, 1000ms);
  ASSERT_GT(c.client_id(), 0);
  std::promise<std::vector<long long>> done;
  boost::asio::post(c.io(), [&] {
    auto got = std::make_shared<std::vector<long long>>();
    for (int i = 0; i < 10; ++i) {
      std::string command;
      sluice::redis::append_command(command, {"INCR", "io:counter"});
      c.conn().exec_on_io_thread(clock_type::now() + 1s, std::move(command),
                                 [&done, got, i](std::error_code ec, reply_ptr r) {
                                   got->push_back(!ec && r ? r->integer : -1);
                                   if (i == 9) done.set_value(*got);
                                 });
    }
  });
  EXPECT_EQ(done.get_future().get(), (std::vector<long long>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

// A Sentinel's failover, as the connection sees it: pointed at another server, it connects
// there at once, and a request sent meanwhile is answered by the new server.
TEST(RedisConnectionTest, RetargetedItServesFromTheNewServer) {
  sluice::test::redis_server a, b;
  connected c(a, 1000ms);
  ASSERT_FALSE(c.exec({"SET", "where", "a"}).ec);
  {
    connected on_b(b, 1000ms);
    ASSERT_FALSE(on_b.exec({"SET", "where", "b"}).ec);  // what tells b apart
  }
  c.conn().retarget("127.0.0.1", b.port());
  // Sent right after the retarget: it waits for the new connection, it does not fail.
  auto o = c.exec({"GET", "where"});
  ASSERT_FALSE(o.ec) << o.ec.message();
  ASSERT_TRUE(o.reply);
  EXPECT_EQ(sluice::redis::reply_text(*o.reply), "b");
  EXPECT_EQ(c.conn().current_state(), connection::state::up);
  c.conn().retarget("127.0.0.1", b.port());  // the same server: nothing happens
  EXPECT_EQ(c.exec({"GET", "where"}).ec, std::error_code{});
}

}  // namespace
