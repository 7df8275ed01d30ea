// The Redis backend against a real redis-server: decisions, keys, AUTH/SELECT, NOSCRIPT
// recovery, refill and retry_after in real time, backpressure and shutdown.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

redis_options options_for(const std::string& url) {
  redis_options o;
  o.url = url;
  // Generous: these tests check answers, not speed, and CI machines stall.
  o.command_timeout = 2000ms;
  o.connect_timeout = 2000ms;
  return o;
}

policy bucket(std::uint64_t capacity, double refill) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = refill;
  return p;
}

decision decide_ok(backend& b, std::string_view key, const policy& p, std::uint64_t cost = 1) {
  decision d;
  const auto ec = b.decide(key, p, cost, d);
  EXPECT_FALSE(ec) << ec.message();
  return d;
}

TEST(RedisBackendTest, DecidesAndStoresUnderThePrefix) {
  test::redis_server redis;
  auto o = options_for(redis.url());
  o.key_prefix = "pfx:";
  auto b = make_redis_backend(o.url, o);
  const auto p = bucket(3, 0.001);
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const auto d = decide_ok(*b, "user", p);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.limit, 3u);
    EXPECT_EQ(d.remaining, 3 - i);
    EXPECT_EQ(d.retry_after, 0ms);
    EXPECT_FALSE(d.degraded);
  }
  const auto denied = decide_ok(*b, "user", p);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining, 0u);
  // One token at 0.001/s takes 1000 s.
  EXPECT_GT(denied.retry_after, 999'000ms);
  EXPECT_LE(denied.retry_after, 1'000'000ms);

  test::redis_client c(redis.port());
  EXPECT_TRUE(c.get("pfx:user"));
  EXPECT_FALSE(c.get("user"));
  EXPECT_FALSE(c.get("sluice:user"));
}

TEST(RedisBackendTest, CostSpendsSeveralTokens) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  const auto p = bucket(10, 1);
  EXPECT_EQ(decide_ok(*b, "k", p, 7).remaining, 3u);
  const auto d = decide_ok(*b, "k", p, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 3u);
  EXPECT_TRUE(decide_ok(*b, "k", p, 3).allowed);
}

TEST(RedisBackendTest, RefillAndRetryAfterInRealTime) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  // 20 tokens/s: one token per 50 ms; capacity 5 refills in 250 ms.
  const auto p = bucket(5, 20);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(decide_ok(*b, "r", p).allowed);
  const auto t_empty = std::chrono::steady_clock::now();
  const auto denied = decide_ok(*b, "r", p);
  ASSERT_FALSE(denied.allowed);
  // Exactly the time until one token exists: at most 50 ms, less the time since emptied.
  EXPECT_GT(denied.retry_after, 0ms);
  EXPECT_LE(denied.retry_after, 50ms);
  EXPECT_GT(denied.reset_after, 200ms);
  EXPECT_LE(denied.reset_after, 250ms);

  test::redis_client c(redis.port());
  const auto ttl = c.pttl("sluice:r");
  EXPECT_GT(ttl, 150);  // the key lives until the bucket would be full again
  EXPECT_LE(ttl, 250);

  std::this_thread::sleep_for(denied.retry_after + 5ms);
  const auto again = decide_ok(*b, "r", p);
  EXPECT_TRUE(again.allowed) << "retry_after " << denied.retry_after.count() << " ms was too short";

  // After a full refill the bucket admits the whole capacity again, and no more.
  std::this_thread::sleep_for(std::chrono::steady_clock::now() - t_empty + 300ms);
  int admitted = 0;
  for (int i = 0; i < 7; ++i) admitted += decide_ok(*b, "r", p).allowed ? 1 : 0;
  // 5 from the full bucket; at most 1 more could refill while the 7 calls ran (50 ms each).
  EXPECT_GE(admitted, 5);
  EXPECT_LE(admitted, 6);
}

TEST(RedisBackendTest, DecidesWithEvalshaOfTheEmbeddedScript) {
  // A wrong embedded SHA would still work (NOSCRIPT, then EVAL every time), only slowly:
  // the command statistics tell.
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  for (int i = 0; i < 10; ++i) decide_ok(*b, "sha", bucket(100, 1));
  test::redis_client c(redis.port());
  const auto info = c.command({"INFO", "commandstats"});
  const std::string text(redis::reply_text(*info));
  EXPECT_NE(text.find("cmdstat_evalsha:calls=10,"), std::string::npos) << text;
  EXPECT_EQ(text.find("cmdstat_eval:"), std::string::npos) << text;
}

TEST(RedisBackendTest, RecoversFromScriptFlush) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  const auto p = bucket(100, 1);
  EXPECT_EQ(decide_ok(*b, "n", p).remaining, 99u);
  test::redis_client c(redis.port());
  for (int round = 0; round < 3; ++round) {
    c.script_flush();
    // The first call meets NOSCRIPT and is re-sent as EVAL; the state is untouched.
    EXPECT_EQ(decide_ok(*b, "n", p).remaining, 98u - 2 * round);
    EXPECT_EQ(decide_ok(*b, "n", p).remaining, 97u - 2 * round);
  }
}

TEST(RedisBackendTest, SameBackendWorksAfterRedisRestart) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  const auto p = bucket(100, 1);
  EXPECT_EQ(decide_ok(*b, "n", p).remaining, 99u);
  redis.restart();  // no scripts, no keys, same port
  const auto until = std::chrono::steady_clock::now() + 10s;
  decision d;
  std::error_code ec;
  do {
    ec = b->decide("n", p, 1, d);
    if (ec) std::this_thread::sleep_for(10ms);
  } while (ec && std::chrono::steady_clock::now() < until);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 99u);  // a fresh bucket: the restart lost the old one
}

TEST(RedisBackendTest, AuthWithPassword) {
  test::redis_server redis({"--requirepass", "p@ss word"});
  const auto good_url = "redis://:p%40ss%20word@127.0.0.1:" + std::to_string(redis.port());
  auto good = make_redis_backend(good_url, options_for(good_url));
  EXPECT_TRUE(decide_ok(*good, "a", bucket(5, 1)).allowed);

  auto o = options_for("redis://:wrong@127.0.0.1:" + std::to_string(redis.port()));
  o.connect_timeout = 500ms;
  auto bad = make_redis_backend(o.url, o);
  decision d;
  EXPECT_EQ(bad->decide("a", bucket(5, 1), 1, d), errc::backend_unavailable);
}

TEST(RedisBackendTest, AuthWithAclUserAndSelectDb) {
  test::redis_server redis;
  {
    test::redis_client admin(redis.port());
    auto r = admin.command({"ACL", "SETUSER", "limiter", "on", ">s3cret", "~*", "+@all"});
    ASSERT_FALSE(redis::is_error(*r)) << redis::reply_text(*r);
  }
  const auto url = "redis://limiter:s3cret@127.0.0.1:" + std::to_string(redis.port()) + "/5";
  auto b = make_redis_backend(url, options_for(url));
  EXPECT_TRUE(decide_ok(*b, "acl", bucket(5, 1)).allowed);
  test::redis_client c(redis.port());
  EXPECT_FALSE(c.get("sluice:acl"));  // not in db 0
  ASSERT_FALSE(redis::is_error(*c.command({"SELECT", "5"})));
  EXPECT_TRUE(c.get("sluice:acl"));
}

TEST(RedisBackendTest, AsyncDecideCompletesOnTheIoThread) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  std::promise<std::pair<std::error_code, std::thread::id>> done;
  b->async_decide("x", bucket(5, 1), 1, [&](std::error_code ec, decision) {
    done.set_value({ec, std::this_thread::get_id()});
  });
  auto [ec, id] = done.get_future().get();
  EXPECT_FALSE(ec);
  EXPECT_NE(id, std::this_thread::get_id());
}

TEST(RedisBackendTest, MaxInFlightFailsFastWithOverloaded) {
  test::redis_server redis;
  auto o = options_for(redis.url());
  o.max_in_flight = 4;
  auto b = make_redis_backend(o.url, o);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(5, 1), 1, warm));
  redis.pause();  // nothing completes while paused, so in-flight calls pile up
  std::atomic<int> overloaded{0}, completed{0};
  for (int i = 0; i < 20; ++i) {
    b->async_decide("o", bucket(5, 1), 1, [&](std::error_code ec, decision) {
      if (ec == errc::backend_overloaded) ++overloaded;
      ++completed;
    });
  }
  EXPECT_EQ(overloaded.load(), 16);
  redis.resume();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (completed.load() < 20 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(5ms);
  EXPECT_EQ(completed.load(), 20);
}

TEST(RedisBackendTest, DestructionCompletesPendingCallsWithShuttingDown) {
  test::redis_server redis;
  auto o = options_for(redis.url());
  o.command_timeout = 60s;  // only shutdown can complete these
  auto b = make_redis_backend(o.url, o);
  decision warm;
  ASSERT_FALSE(b->decide("warm", bucket(5, 1), 1, warm));
  redis.pause();
  std::atomic<int> shutting_down{0}, completed{0};
  for (int i = 0; i < 10; ++i) {
    b->async_decide("s", bucket(5, 1), 1, [&](std::error_code ec, decision) {
      if (ec == errc::backend_shutting_down) ++shutting_down;
      ++completed;
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  b.reset();  // must not wait for the paused server
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(completed.load(), 10);
  EXPECT_EQ(shutting_down.load(), 10);
  redis.resume();
}

TEST(RedisBackendTest, RejectsBadOptions) {
  redis_options o;
  o.url = "http://x";
  EXPECT_THROW(make_redis_backend(o.url, o), std::invalid_argument);
  o.url = "redis://127.0.0.1:1";
  o.command_timeout = 0ms;
  EXPECT_THROW(make_redis_backend(o.url, o), std::invalid_argument);
}

}  // namespace
