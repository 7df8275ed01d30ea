// limiter::async_acquire on a real redis-server: waiters of one limiter are served in
// arrival order by releases through it; a slot freed through another connection (as by
// another process) is found by the first waiter's polling, and the others do not poll;
// a limiter destroyed while waiters are pending completes them.
// Waits poll a condition against a deadline; the holds are the holders' "work".
#include <sluice/concurrency.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

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

// Only releases free a slot in these tests: no lease ends while they run.
concurrency_policy slots(std::uint64_t limit) {
  return {.limit = limit, .lease_ttl = 60s, .on_failure = failure_mode::closed};
}

template <class F>
bool eventually(std::chrono::milliseconds within, F&& ok) {
  const auto deadline = steady::now() + within;
  for (;;) {
    if (ok()) return true;
    if (steady::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
}

// An io_context run by one thread for the test's lifetime.
struct runner {
  boost::asio::io_context ctx;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{ctx.get_executor()};
  std::thread thread{[this] { ctx.run(); }};
  ~runner() {
    work.reset();
    ctx.stop();
    thread.join();
  }
};

TEST(RedisSlotWaitTest, ConcurrentWaitersAreServedInArrivalOrderByReleases) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  const auto p = slots(1);
  auto holder = lim.try_acquire("k", p);
  ASSERT_TRUE(holder);

  runner io;
  std::mutex mu;
  std::vector<int> order;
  std::atomic<int> served{0}, failed{0};
  constexpr int waiters = 5;
  for (int i = 0; i < waiters; ++i) {
    const auto refused = lim.slot_stats().refused;
    lim.async_acquire("k", p, 20s,
                      boost::asio::bind_executor(io.ctx, [&, i](std::error_code ec, slot s) {
                        if (ec || !s) failed.fetch_add(1);
                        {
                          std::lock_guard lock(mu);
                          order.push_back(i);
                        }
                        served.fetch_add(1);
                        // `s` is released here: the next waiter's turn.
                      }));
    // Arrived: the first was refused (the others queue behind it without asking Redis).
    if (i == 0) {
      ASSERT_TRUE(eventually(10s, [&] { return lim.slot_stats().refused > refused; }));
    }
  }
  holder.release();
  ASSERT_TRUE(eventually(15s, [&] { return served.load() == waiters; }))
      << served.load() << " of " << waiters << " waiters served";
  EXPECT_EQ(failed.load(), 0);
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(RedisSlotWaitTest, ASlotFreedByAnotherProcessIsFoundByTheFirstWaitersPolling) {
  test::redis_server redis;
  // Two limiters, two connections: a release through `other` wakes nobody in `lim`.
  auto lim = redis_limiter(redis.url());
  auto other = redis_limiter(redis.url());
  const auto p = slots(1);
  auto holder = other.try_acquire("k", p);
  ASSERT_TRUE(holder);

  runner io;
  constexpr int waiters = 5;
  std::atomic<int> served{0}, held{0};
  std::atomic<bool> keep{true};
  std::vector<slot> kept(waiters);  // touched on the io thread only
  for (int i = 0; i < waiters; ++i) {
    lim.async_acquire("k", p, 20s,
                      boost::asio::bind_executor(io.ctx, [&, i](std::error_code ec, slot s) {
                        if (!ec && s) held.fetch_add(1);
                        // Held until the test lets go; later ones are given back at once.
                        if (keep) kept[static_cast<std::size_t>(i)] = std::move(s);
                        served.fetch_add(1);
                      }));
  }
  // The holder's "work". Polling backs off to one attempt per 50 ms or so; only the first
  // waiter polls, so the five together ask about as often as one.
  std::this_thread::sleep_for(600ms);
  const auto refused = lim.slot_stats().refused;
  EXPECT_LT(refused, 60u) << "waiters that poll in step, or without backoff, ask far more often";
  EXPECT_EQ(served.load(), 0);

  holder.release();
  ASSERT_TRUE(eventually(15s, [&] { return served.load() >= 1; }));
  EXPECT_EQ(held.load(), 1) << "one slot freed, one waiter served";
  // Freed through this limiter now: the next waiter is woken.
  io.ctx.post([&] { kept[0].release(); });
  EXPECT_TRUE(eventually(15s, [&] { return held.load() == 2; }));
  io.ctx.post([&] {
    keep = false;  // each next waiter releases at once: the rest are served one by one
    kept[1].release();
  });
  EXPECT_TRUE(eventually(15s, [&] { return served.load() == waiters; }));
}

TEST(RedisSlotWaitTest, MaxWaitEndsTheWaitWithTheRefusalOfALastAttempt) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  const auto p = slots(1);
  auto holder = lim.try_acquire("k", p);
  ASSERT_TRUE(holder);
  runner io;
  std::promise<std::pair<std::error_code, slot>> result;
  const auto start = steady::now();
  lim.async_acquire("k", p, 300ms,
                    boost::asio::bind_executor(io.ctx, [&](std::error_code ec, slot s) {
                      result.set_value({ec, std::move(s)});
                    }));
  auto f = result.get_future();
  ASSERT_EQ(f.wait_for(20s), std::future_status::ready);
  auto [ec, s] = f.get();
  EXPECT_GE(steady::now() - start, 300ms) << "not given up before max_wait";
  EXPECT_FALSE(ec) << "over the limit is a value, not an error";
  EXPECT_FALSE(s);
  EXPECT_FALSE(s.degraded());
  EXPECT_EQ(s.in_flight(), 1u);
  EXPECT_GT(s.retry_after(), 0ms) << "the holder's lease ends in about a minute";
  EXPECT_TRUE(holder) << "a waiter that gave up took nothing";
  EXPECT_TRUE(lim.try_acquire("k", p).in_flight() == 1) << "and holds nothing";
}

TEST(RedisSlotWaitTest, DestroyingTheLimiterCompletesPendingWaiters) {
  test::redis_server redis;
  auto other = redis_limiter(redis.url());
  const auto p = slots(1);
  auto holder = other.try_acquire("k", p);
  runner io;
  std::atomic<int> canceled{0};
  {
    auto lim = redis_limiter(redis.url());
    for (int i = 0; i < 3; ++i) {
      lim.async_acquire("k", p, 20s,
                        boost::asio::bind_executor(io.ctx, [&](std::error_code ec, slot s) {
                          if (ec == std::errc::operation_canceled && !s) canceled.fetch_add(1);
                        }));
    }
    ASSERT_TRUE(eventually(10s, [&] { return lim.slot_stats().refused >= 1; }));
  }
  EXPECT_TRUE(eventually(15s, [&] { return canceled.load() == 3; }))
      << canceled.load() << " of 3 waiters completed";
  EXPECT_TRUE(holder) << "nobody else's slot was touched";
}

}  // namespace
