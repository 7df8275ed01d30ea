// slot::async_release and slot::async_renew on a real redis-server: they complete on the
// handler's executor with the server's answer (a renewal keeps a slow holder past its first
// lease; an ended lease renews to false without freeing the new holder's slot; a release
// frees the slot once answered), and report a server that is gone as an error.
#include <chrono>
#include <future>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <sluice/concurrency.hpp>
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

limiter redis_limiter(const std::string& url) {
  redis_options o;
  o.command_timeout = 2000ms;  // answers, not speed: CI machines stall
  o.connect_timeout = 2000ms;
  return limiter(make_redis_backend(url, o));
}

concurrency_policy slots(std::uint64_t limit, std::chrono::milliseconds ttl) {
  return {.limit = limit, .lease_ttl = ttl, .on_failure = failure_mode::closed};
}

TEST(RedisSlotAsyncTest, ReleaseIsAnsweredOnTheHandlersExecutorAndFreesTheSlot) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  const auto p = slots(1, 30s);
  auto s = lim.try_acquire("k", p);
  ASSERT_TRUE(s) << s.backend_error().message();
  boost::asio::io_context io;
  std::promise<std::error_code> got;
  s.async_release(boost::asio::bind_executor(io.get_executor(),
                                             [&](std::error_code ec) { got.set_value(ec); }));
  EXPECT_FALSE(s);
  EXPECT_EQ(io.run_for(10s), 1u) << "the completion ran on the io_context";
  EXPECT_FALSE(got.get_future().get());
  // Answered: the server has freed it, so the next acquire gets it at once (no retry).
  EXPECT_TRUE(lim.try_acquire("k", p));
}

TEST(RedisSlotAsyncTest, RenewKeepsASlowHolderAndAnEndedLeaseRenewsToFalse) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  // A lease ten renewal intervals long: a stall of the test (ASan on a busy machine) of
  // several hundred ms between renewals must not end it.
  const auto p = slots(1, 1000ms);
  auto slow = lim.try_acquire("report", p);
  ASSERT_TRUE(slow);
  // Two and a half leases long, renewed every 100 ms: never free for anyone else.
  const auto until = steady::now() + 2500ms;
  while (steady::now() < until) {
    std::this_thread::sleep_for(100ms);  // the slow holder's work between renewals
    auto [ec, held] = slow.async_renew(boost::asio::use_future).get();
    ASSERT_FALSE(ec) << ec.message();
    ASSERT_TRUE(held);
    EXPECT_EQ(slow.expires_in(), 1000ms);
    EXPECT_FALSE(lim.try_acquire("report", p));
  }
  // It stalls: its lease ends and another holder gets the slot.
  slot next;
  const auto deadline = steady::now() + 5s;
  while (!(next = lim.try_acquire("report", p)) && steady::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_TRUE(next);
  auto [ec, held] = slow.async_renew(boost::asio::use_future).get();
  EXPECT_FALSE(ec);
  EXPECT_FALSE(held) << "the ended lease cannot be renewed";
  EXPECT_FALSE(slow);
  EXPECT_FALSE(slow.async_release(boost::asio::use_future).get());
  EXPECT_FALSE(lim.try_acquire("report", p)) << "next still holds it";
  EXPECT_TRUE(next.async_renew(boost::asio::use_future).get() ==
              std::make_tuple(std::error_code{}, true));
}

TEST(RedisSlotAsyncTest, AServerThatIsGoneIsAnError) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  const auto p = slots(2, 30s);
  auto a = lim.try_acquire("k", p);
  auto b = lim.try_acquire("k", p);
  ASSERT_TRUE(a && b);
  redis.kill();
  auto [ec, held] = a.async_renew(boost::asio::use_future).get();
  EXPECT_TRUE(ec) << "not a made-up renewal";
  EXPECT_FALSE(held);
  EXPECT_TRUE(a) << "kept, so that it is released later";
  EXPECT_TRUE(b.async_release(boost::asio::use_future).get()) << "the release was not answered";
  EXPECT_FALSE(b);
}

}  // namespace
