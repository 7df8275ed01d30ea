// All-or-nothing decisions over several keys against a real redis-server: one denial
// spends nothing anywhere, duplicate keys, NOSCRIPT recovery for the multi script, and
// concurrent callers that can never over-admit or lose tokens to denied calls.
#include <sluice/error.hpp>
#include <sluice/limiter.hpp>
#include <sluice/redis_backend.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <latch>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "redis/scripts.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

redis_options options_for(const std::string& url) {
  redis_options o;
  o.url = url;
  // Generous: these tests check answers, not speed, and CI machines stall.
  o.command_timeout = 5000ms;
  o.connect_timeout = 5000ms;
  return o;
}

// 0.001 tokens/s: not a whole token refills while a test runs, so counts are exact.
policy slow(std::uint64_t capacity) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = 0.001;
  p.on_failure = failure_mode::closed;  // a failed call can only lower the counts
  return p;
}

std::vector<decision> all_ok(backend& b, const std::vector<check_item>& items) {
  std::vector<decision> out;
  const auto ec = b.decide_all(items, out);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(out.size(), items.size());
  for (const auto& d : out) EXPECT_FALSE(d.degraded);
  return out;
}

// Whole tokens in the stored bucket ("level_ut ts_ms"); a missing key is full.
std::uint64_t stored_tokens(test::redis_client& c, const std::string& key, std::uint64_t full) {
  const auto v = c.get("sluice:" + key);
  if (!v) return full;
  return std::stoull(v->substr(0, v->find(' '))) / 1'000'000;
}

TEST(RedisDecideAllTest, OneDenialSpendsNothingAnywhere) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  test::redis_client c(redis.port());
  const auto a = slow(10), small = slow(2);
  // Spend 3 of a alone and empty "b", then ask for both.
  ASSERT_TRUE(all_allowed(all_ok(*b, {{"a", a, 3}})));
  ASSERT_TRUE(all_allowed(all_ok(*b, {{"b", small, 2}})));
  const auto before = c.get("sluice:a");
  const auto ds = all_ok(*b, {{"a", a, 4}, {"b", small, 1}});
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_TRUE(ds[0].allowed);      // a alone would allow...
  EXPECT_EQ(ds[0].remaining, 7u);  // ...but spent nothing
  EXPECT_EQ(ds[0].retry_after, 0ms);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].remaining, 0u);
  EXPECT_GT(ds[1].retry_after, 999'000ms);  // one token at 0.001/s
  EXPECT_LE(ds[1].retry_after, 1'000'000ms);
  EXPECT_EQ(c.get("sluice:a"), before);  // not even rewritten
  EXPECT_EQ(stored_tokens(c, "a", 10), 7u);
}

TEST(RedisDecideAllTest, AllAllowSpendsEveryKeyInOneStep) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  test::redis_client c(redis.port());
  const auto a = slow(5), small = slow(3);
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const auto ds = all_ok(*b, {{"a", a, 1}, {"b", small, 1}});
    ASSERT_TRUE(all_allowed(ds));
    EXPECT_EQ(ds[0].remaining, 5 - i);
    EXPECT_EQ(ds[1].remaining, 3 - i);
  }
  EXPECT_EQ(stored_tokens(c, "a", 5), 2u);
  EXPECT_EQ(stored_tokens(c, "b", 3), 0u);
  // Each key expires when its bucket would be full again (as with one key).
  EXPECT_GT(c.pttl("sluice:b"), 2'990'000);
  EXPECT_LE(c.pttl("sluice:b"), 3'000'000);
  const auto ds = all_ok(*b, {{"a", a, 1}, {"b", small, 1}});
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(stored_tokens(c, "a", 5), 2u);
}

TEST(RedisDecideAllTest, DuplicateKeysAddUpAgainstOneBucket) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  test::redis_client c(redis.port());
  const auto p = slow(5);
  auto ds = all_ok(*b, {{"k", p, 2}, {"k", p, 2}});
  ASSERT_TRUE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 3u);
  EXPECT_EQ(ds[1].remaining, 1u);
  EXPECT_EQ(stored_tokens(c, "k", 5), 1u);
  ds = all_ok(*b, {{"k", p, 1}, {"k", p, 1}});
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].remaining, 1u);
  EXPECT_EQ(stored_tokens(c, "k", 5), 1u);
}

TEST(RedisDecideAllTest, OneItemUsesTheSingleKeyScript) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  test::redis_client c(redis.port());
  const auto p = slow(2);
  // Only the single-key script is left on the server: a one-item call must not need
  // another (a multi-script call would meet NOSCRIPT and fall back to EVAL).
  c.script_flush();
  c.command({"SCRIPT", "LOAD", detail::lua_decide.source});
  const auto ds = all_ok(*b, {{"solo", p, 1}});
  ASSERT_TRUE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 1u);
  auto stats = c.command({"INFO", "commandstats"});
  const std::string text(redis::reply_text(*stats));
  EXPECT_NE(text.find("cmdstat_evalsha:calls=1,"), std::string::npos) << text;
  EXPECT_EQ(text.find("cmdstat_eval:"), std::string::npos) << text;
  EXPECT_TRUE(all_ok(*b, {}).empty());
}

TEST(RedisDecideAllTest, NoscriptAfterScriptFlushIsRecovered) {
  test::redis_server redis;
  auto b = make_redis_backend(redis.url(), options_for(redis.url()));
  test::redis_client c(redis.port());
  const auto p = slow(3);
  ASSERT_TRUE(all_allowed(all_ok(*b, {{"x", p, 1}, {"y", p, 1}})));
  c.script_flush();
  auto ds = all_ok(*b, {{"x", p, 1}, {"y", p, 1}});  // EVALSHA meets NOSCRIPT, then EVAL
  ASSERT_TRUE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 1u);
  ds = all_ok(*b, {{"x", p, 1}, {"y", p, 1}});  // EVALSHA again: EVAL cached it
  EXPECT_EQ(ds[1].remaining, 0u);
  auto stats = c.command({"INFO", "commandstats"});
  const std::string text(redis::reply_text(*stats));
  EXPECT_NE(text.find("cmdstat_eval:calls=1,"), std::string::npos) << text;
}

TEST(RedisDecideAllTest, LimiterCheckAllOnRedisAndFailureModes) {
  test::redis_server redis;
  auto o = options_for(redis.url());
  limiter lim(make_redis_backend(o.url, o));
  const auto a = slow(4), b = slow(1);
  ASSERT_TRUE(all_allowed(lim.check_all(std::vector<check_item>{{"a", a, 1}, {"b", b, 1}})));
  const auto ds = lim.check_all(std::vector<check_item>{{"a", a, 1}, {"b", b, 1}});
  EXPECT_FALSE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 3u);
  EXPECT_FALSE(ds[0].degraded);
  redis.kill();
  policy open = slow(4);
  open.on_failure = failure_mode::open;
  const auto down = lim.check_all(std::vector<check_item>{{"a", open, 1}, {"b", b, 1}});
  ASSERT_EQ(down.size(), 2u);
  EXPECT_TRUE(down[0].degraded && down[1].degraded);
  EXPECT_TRUE(down[0].allowed);
  EXPECT_FALSE(down[1].allowed);  // closed
}

// The handler runs on the connection's I/O thread, never the caller's, with the decisions
// and failure modes of the blocking calls.
TEST(RedisDecideAllTest, OnBackendThreadCompletesOnTheIoThread) {
  test::redis_server redis;
  limiter lim(make_redis_backend(redis.url(), options_for(redis.url())));
  const auto caller = std::this_thread::get_id();
  struct seen {
    std::thread::id where;
    std::vector<decision> ds;
  };
  auto one = [&](const std::string& key, const policy& p) {
    std::promise<seen> done;
    lim.async_check(on_backend_thread, key, p, 1, [&](std::error_code ec, decision d) {
      EXPECT_FALSE(ec);
      done.set_value({std::this_thread::get_id(), {d}});
    });
    return done.get_future().get();
  };
  auto pair = [&](const policy& a, const policy& b) {
    std::promise<seen> done;
    lim.async_check_all(on_backend_thread, std::vector<check_item>{{"a", a, 1}, {"b", b, 1}},
                        [&](std::error_code ec, std::vector<decision> ds) {
                          EXPECT_FALSE(ec);
                          done.set_value({std::this_thread::get_id(), std::move(ds)});
                        });
    return done.get_future().get();
  };
  const auto a = slow(4), b = slow(1);
  const auto first = one("b", b);
  EXPECT_NE(first.where, caller);
  EXPECT_TRUE(first.ds.at(0).allowed);
  const auto second = one("b", b);
  EXPECT_EQ(second.where, first.where);  // one connection, one I/O thread
  EXPECT_FALSE(second.ds.at(0).allowed);
  const auto both = pair(a, b);
  EXPECT_EQ(both.where, first.where);
  ASSERT_EQ(both.ds.size(), 2u);
  EXPECT_FALSE(all_allowed(both.ds));
  EXPECT_EQ(lim.check("a", a).remaining, 3u);  // the denied pair spent nothing of "a"
  redis.kill();
  const auto down = one("a", a);  // closed: denied, degraded, within the timeout
  EXPECT_FALSE(down.ds.at(0).allowed);
  EXPECT_TRUE(down.ds.at(0).degraded);
}

// Pairs of keys from many threads, with lone callers on each key in between: exactly the
// smaller capacity of pairs gets through, and no bucket gives a token to a denied pair.
TEST(RedisDecideAllTest, ConcurrentPairsNeverOverAdmitNorLeakTokens) {
  test::redis_server redis;
  limiter lim(make_redis_backend(redis.url(), options_for(redis.url())));
  test::redis_client c(redis.port());
  const auto wide = slow(40), narrow = slow(15);
  // Connect first, so the callers race on the keys and not on the connection.
  lim.check("warm-up", wide);
  constexpr int threads = 16, calls = 12;
  std::latch start(threads);
  std::atomic<int> pairs{0}, wide_alone{0}, degraded{0};
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        start.arrive_and_wait();
        for (int i = 0; i < calls; ++i) {
          if (t == 3) {  // 12 lone calls: wide (40) never runs dry, narrow (15) does
            const auto d = lim.check("wide", wide);
            if (d.degraded) ++degraded;
            if (d.allowed) ++wide_alone;
            continue;
          }
          std::vector<check_item> items{{"wide", wide, 1}, {"narrow", narrow, 1}};
          if (t % 2) std::swap(items[0], items[1]);
          const auto ds = lim.check_all(items);
          for (const auto& d : ds) degraded += d.degraded ? 1 : 0;
          if (all_allowed(ds)) ++pairs;
        }
      });
    }
  }
  ASSERT_EQ(degraded.load(), 0) << "calls failed: the counts prove nothing";
  EXPECT_EQ(pairs.load(), 15);
  EXPECT_EQ(stored_tokens(c, "narrow", 15), 0u);
  // wide lost exactly what pairs and lone callers were admitted, nothing to denied pairs.
  EXPECT_EQ(stored_tokens(c, "wide", 40), 40u - static_cast<std::uint64_t>(pairs + wide_alone));
}

}  // namespace
