// The middleware's asynchronous concurrency gate (sluice/http/concurrency_gate.hpp) on a
// real redis-server: async_enter_concurrency never blocks the thread of the io_context its
// handlers run on (a timer on that one-thread io_context keeps firing while 50 requests
// wait for a slot), the waiters are served one by one by releases, and a refusal of a later
// rule gives back the slot of an earlier one. Waits poll a condition against a deadline.
#include <sluice/http/concurrency_gate.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>

#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
using policies = std::map<std::string, sluice::policy, std::less<>>;
using slot_policies = std::map<std::string, concurrency_policy, std::less<>>;

limiter redis_limiter(const std::string& url) {
  redis_options o;
  o.command_timeout = 2000ms;  // answers, not speed: CI machines stall
  o.connect_timeout = 2000ms;
  return limiter(make_redis_backend(url, o));
}

http::request_facts from(const std::string& ip, const std::string& path) {
  http::request_facts f;
  f.peer = ip;
  f.method = "GET";
  f.path = path;
  f.host = "example.com";
  return f;
}

http::rule make_rule(std::string name, std::string prefix, std::string policy,
                     std::chrono::milliseconds max_wait = 0ms) {
  http::rule r;
  r.name = std::move(name);
  r.match.path_prefix = std::move(prefix);
  r.key = *http::key_spec::parse("ip");
  r.policy = std::move(policy);
  r.max_wait = max_wait;
  return r;
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

TEST(HttpConcurrencyRedisTest, WaitingGatesNeverBlockTheIoContextThread) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  // Only releases free the slot here: no lease ends while the test runs.
  const http::rule_set set(
      policies{},
      slot_policies{
          {"reports", {.limit = 1, .lease_ttl = 60s, .on_failure = failure_mode::closed}}},
      {make_rule("reports", "/reports/", "reports", 30s)});
  auto holder = http::enter_concurrency(lim, set, from("192.0.2.1", "/reports/0"));
  ASSERT_TRUE(holder.admitted());

  // One io_context, one thread: the gates' handlers, their wait timers and a ticking timer.
  boost::asio::io_context io;
  std::atomic<int> ticks{0}, admitted{0}, refused{0}, off_thread{0};
  int held = 0, most_held = 0;  // the io thread's only
  bool stopping = false;        // the io thread's only
  boost::asio::steady_timer ticker(io);
  std::function<void()> tick = [&] {
    ticker.expires_after(1ms);
    ticker.async_wait([&](boost::system::error_code ec) {
      // A cancel() that comes after the timer expired does not stop a handler already
      // queued: the flag does.
      if (ec || stopping) return;
      ticks.fetch_add(1);
      tick();
    });
  };
  constexpr int gates = 50;
  boost::asio::post(io, [&] {
    tick();
    for (int i = 0; i < gates; ++i) {
      http::async_enter_concurrency(
          lim, set, from("192.0.2.1", "/reports/" + std::to_string(i + 1)), 503,
          boost::asio::bind_executor(io, [&](std::error_code ec, http::gate_pass pass) {
            if (!io.get_executor().running_in_this_thread()) off_thread.fetch_add(1);
            if (ec || !pass.admitted()) {
              refused.fetch_add(1);
              return;
            }
            most_held = std::max(most_held, ++held);
            // The request's "work": one more tick on this thread, then its slot back (a
            // release through this limiter wakes the next waiter).
            auto t = std::make_shared<boost::asio::steady_timer>(io, 1ms);
            auto p = std::make_shared<http::gate_pass>(std::move(pass));
            t->async_wait([&, t, p](boost::system::error_code) {
              --held;
              p->release();
              admitted.fetch_add(1);
            });
          }));
    }
  });
  std::thread runner([&] { io.run(); });

  // The first gate's attempt was refused (the others queue behind it in the limiter), and
  // the timer on the same thread keeps firing while all 50 wait: nothing blocks it.
  ASSERT_TRUE(eventually(20s, [&] { return lim.slot_stats().refused >= 1; }));
  const int before = ticks.load();
  EXPECT_TRUE(eventually(20s, [&] { return ticks.load() >= before + 50; }))
      << "the io_context thread is blocked: " << ticks.load() - before << " ticks";
  EXPECT_EQ(admitted.load() + refused.load(), 0) << "none served while the slot is held";

  holder.release();
  EXPECT_TRUE(eventually(30s, [&] { return admitted.load() + refused.load() == gates; }))
      << admitted.load() << " admitted, " << refused.load() << " refused of " << gates;
  EXPECT_EQ(admitted.load(), gates) << "every waiter served by a release within its max_wait";
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(off_thread.load(), 0) << "handlers run on the io_context's thread";

  boost::asio::post(io, [&] {
    stopping = true;
    ticker.cancel();
  });
  runner.join();
  EXPECT_EQ(most_held, 1) << "never more than the limit in flight";
}

TEST(HttpConcurrencyRedisTest, ARefusalOfTheSecondRuleGivesBackTheFirstRulesSlot) {
  test::redis_server redis;
  auto lim = redis_limiter(redis.url());
  const http::rule_set set(
      policies{},
      slot_policies{{"site", {.limit = 10, .lease_ttl = 60s}},
                    {"reports", {.limit = 1, .lease_ttl = 60s}}},
      {make_rule("site", "/", "site"), make_rule("reports", "/reports/", "reports")});
  auto first = http::async_enter_concurrency(lim, set, from("192.0.2.1", "/reports/1"), 503,
                                             boost::asio::use_future);
  auto [ec1, holder] = first.get();
  ASSERT_FALSE(ec1);
  ASSERT_TRUE(holder.admitted());
  ASSERT_EQ(holder.slots().size(), 2u);

  auto second = http::async_enter_concurrency(lim, set, from("192.0.2.1", "/reports/2"), 503,
                                              boost::asio::use_future);
  auto [ec2, refused] = second.get();
  ASSERT_FALSE(ec2);
  EXPECT_FALSE(refused.admitted());
  EXPECT_EQ(refused.response().status, 503u);
  EXPECT_TRUE(refused.slots().empty());
  // Its "site" slot went back (the release is sent without waiting: look until it landed).
  EXPECT_TRUE(eventually(10s, [&] {
    auto probe = lim.try_acquire("@gate:site:ip=192.0.2.1", {.limit = 10, .lease_ttl = 60s});
    return probe && probe.in_flight() == 2;
  })) << "the site key held by the first request alone";
}

}  // namespace
