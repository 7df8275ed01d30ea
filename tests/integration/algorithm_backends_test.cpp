// Every algorithm through the public API on every backend a user picks: the memory backend,
// a real redis-server, a real Redis Cluster. The same burst gets the same decisions
// everywhere; concurrent callers on one key admit exactly the limit (the decision is one
// atomic script for every algorithm); check_all mixing algorithms is all-or-nothing; a
// cross-slot check_all on a Cluster gives window counts back as it does tokens.
#include <gtest/gtest.h>

#include <sluice/redis_backend.hpp>
#include <sluice/redis_cluster.hpp>
#include <sluice/sluice.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "redis/cluster/key_slot.hpp"
#include "support/cluster_fixture.hpp"
#include "support/policies.hpp"
#include "support/redis_client.hpp"
#include "support/redis_server.hpp"

namespace sluice::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

// Limit 10 for every algorithm, slow enough that nothing comes back while a test runs.
struct named_policy {
  const char* name;
  policy p;
};

std::vector<named_policy> ten_per_long_while() {
  std::vector<named_policy> v;
  for (auto a : {algorithm::token_bucket, algorithm::gcra}) {
    policy p;
    p.algorithm = a;
    p.capacity = 10;
    p.refill_per_second = 0.001;
    p.on_failure = failure_mode::closed;  // a failed call can only lower a count
    v.push_back({to_string(a).data(), p});
  }
  for (auto a :
       {algorithm::sliding_window, algorithm::sliding_window_counter, algorithm::fixed_window}) {
    policy p;
    p.algorithm = a;
    p.limit = 10;
    p.window = 24h;
    p.on_failure = failure_mode::closed;
    v.push_back({to_string(a).data(), p});
  }
  return v;
}

std::shared_ptr<backend> redis_at(const std::string& url) {
  redis_options o;
  o.url = url;
  o.command_timeout = 5s;
  o.connect_timeout = 2s;
  return make_redis_backend(o.url, o);
}

limiter on_cluster(const redis_cluster& cluster) {
  redis_options o;
  o.url = cluster.url();
  o.command_timeout = 2000ms;
  o.connect_timeout = 1000ms;
  return limiter(make_redis_backend(o.url, o));
}

// A burst of checks of cost 3, 3, 3, 1, 1: what a client sees.
std::vector<decision> burst(limiter& lim, const std::string& key, const policy& p) {
  std::vector<decision> out;
  for (std::uint64_t cost : {3, 3, 3, 1, 1}) out.push_back(lim.check(key, p, cost));
  return out;
}

TEST(AlgorithmBackendsTest, MemoryAndRedisDecideABurstAlike) {
  redis_server redis;
  limiter on_redis(redis_at(redis.url()));
  limiter in_memory = limiter::in_memory();
  for (const auto& [name, p] : ten_per_long_while()) {
    SCOPED_TRACE(name);
    const auto want = burst(in_memory, std::string("burst:") + name, p);
    const auto got = burst(on_redis, std::string("burst:") + name, p);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("check " + std::to_string(i));
      EXPECT_FALSE(got[i].degraded) << got[i].backend_error.message();
      EXPECT_EQ(got[i].allowed, want[i].allowed);
      EXPECT_EQ(got[i].limit, 10u);
      EXPECT_EQ(got[i].remaining, want[i].remaining);
      // The two clocks are not the same clock: times agree within the test's own duration.
      EXPECT_NEAR(double(got[i].retry_after.count()), double(want[i].retry_after.count()), 2000);
      EXPECT_NEAR(double(got[i].reset_after.count()), double(want[i].reset_after.count()), 2000);
    }
    // 3 + 3 + 3 + 1 = 10 admitted, the last denied with a wait.
    EXPECT_TRUE(got[3].allowed);
    EXPECT_EQ(got[3].remaining, 0u);
    EXPECT_FALSE(got[4].allowed);
    EXPECT_GT(got[4].retry_after, 0ms);
  }
}

// `callers` threads released together, each running `one` once; returns how many it
// admitted. Fails the test when a call degraded (the count would prove nothing).
int admitted_by(int callers, const std::function<bool(bool& degraded)>& one) {
  std::latch start(callers + 1);
  std::atomic<int> admitted{0}, degraded{0};
  std::vector<std::thread> pool;
  for (int i = 0; i < callers; ++i) {
    pool.emplace_back([&] {
      start.arrive_and_wait();
      bool d = false;
      admitted += one(d) ? 1 : 0;
      degraded += d ? 1 : 0;
    });
  }
  start.arrive_and_wait();
  for (auto& t : pool) t.join();
  EXPECT_EQ(degraded.load(), 0) << "calls failed: the count proves nothing";
  return admitted.load();
}

// 200 concurrent callers on one key admit exactly the limit, for every algorithm.
void race_on_one_key(limiter& lim, const std::string& where) {
  for (const auto& [name, p] : ten_per_long_while()) {
    SCOPED_TRACE(where + " " + name);
    lim.check(std::string("warm-up:") + name, p);  // connected before the race
    const std::string key = std::string("race:") + name;
    EXPECT_EQ(admitted_by(200,
                          [&, &p = p](bool& degraded) {
                            const auto d = lim.check(key, p);
                            degraded = d.degraded;
                            return d.allowed;
                          }),
              10);
  }
}

// check_all mixing algorithms under concurrency: 200 callers each spend 1 of a gcra burst
// of 50 and 1 of a fixed window of 20 (keys of one Cluster slot): exactly 20 calls are
// admitted, and the gcra key spent exactly those 20, nothing for the 180 denied calls.
void race_check_all(limiter& lim, const std::string& where) {
  SCOPED_TRACE(where);
  const auto gcra = test::bucket(algorithm::gcra, 50, 0.001);
  const auto quota = test::window(algorithm::fixed_window, 20, 24h);
  const std::string a = "{mix}:gcra", b = "{mix}:quota";
  lim.check("{mix}:warm-up", gcra);
  const std::vector<check_item> items{{a, gcra, 1}, {b, quota, 1}};
  EXPECT_EQ(admitted_by(200,
                        [&](bool& degraded) {
                          const auto ds = lim.check_all(items);
                          degraded = ds[0].degraded || ds[1].degraded;
                          return all_allowed(ds);
                        }),
            20);
  EXPECT_EQ(lim.peek(a, gcra, 1).remaining, 30u);
  EXPECT_FALSE(lim.peek(b, quota, 1).allowed);
}

TEST(AlgorithmBackendsTest, ConcurrentCallersAdmitExactlyTheLimitOnRedis) {
  redis_server redis;
  limiter lim(redis_at(redis.url()));
  race_on_one_key(lim, "redis");
  race_check_all(lim, "redis");
}

TEST(AlgorithmBackendsTest, ConcurrentCallersAdmitExactlyTheLimitOnCluster) {
  redis_cluster cluster;
  limiter lim = on_cluster(cluster);
  race_on_one_key(lim, "cluster");
  race_check_all(lim, "cluster");
}

TEST(AlgorithmBackendsTest, CheckAllMixingAlgorithmsIsAllOrNothing) {
  redis_server redis;
  limiter on_redis(redis_at(redis.url()));
  limiter in_memory = limiter::in_memory();
  policy gcra;
  gcra.algorithm = algorithm::gcra;
  gcra.capacity = 5;
  gcra.refill_per_second = 0.001;
  policy quota;
  quota.algorithm = algorithm::fixed_window;
  quota.limit = 1;
  quota.window = 24h;
  for (limiter* lim : {&in_memory, &on_redis}) {
    SCOPED_TRACE(lim == &in_memory ? "memory" : "redis");
    const std::vector<check_item> items{{"mix:user", gcra, 2}, {"mix:quota", quota, 1}};
    auto first = lim->check_all(items);
    ASSERT_EQ(first.size(), 2u);
    EXPECT_TRUE(first[0].allowed && first[1].allowed);
    EXPECT_EQ(first[0].remaining, 3u);
    // The quota is used up: the call is denied, and the gcra key spends nothing.
    auto second = lim->check_all(items);
    EXPECT_TRUE(second[0].allowed);      // would have allowed...
    EXPECT_EQ(second[0].remaining, 3u);  // ...and spent nothing
    EXPECT_FALSE(second[1].allowed);
    EXPECT_GT(second[1].retry_after, 0ms);
    EXPECT_EQ(lim->check("mix:user", gcra, 3).remaining, 0u);
    // Two algorithms on one key in one call is refused before any backend.
    std::error_code ec;
    lim->check_all(std::vector<check_item>{{"mix:same", gcra, 1}, {"mix:same", quota, 1}}, ec);
    EXPECT_EQ(ec, errc::mismatched_parameters);
  }
}

TEST(AlgorithmBackendsTest, ClusterDecidesEveryAlgorithmAndRefundsAcrossSlots) {
  redis_cluster cluster;
  limiter lim = on_cluster(cluster);
  limiter in_memory = limiter::in_memory();
  const auto all = ten_per_long_while();
  lim.check("warm-up", all[0].p);  // the slot map is there before anything is counted
  for (const auto& [name, p] : all) {
    SCOPED_TRACE(name);
    const auto want = burst(in_memory, std::string("c:") + name, p);
    const auto got = burst(lim, std::string("c:") + name, p);
    for (std::size_t i = 0; i < got.size(); ++i) {
      EXPECT_FALSE(got[i].degraded) << got[i].backend_error.message();
      EXPECT_EQ(got[i].allowed, want[i].allowed) << i;
      EXPECT_EQ(got[i].remaining, want[i].remaining) << i;
    }
  }
  // Keys on two masters: the first slot group spends, the second denies, and the first
  // gets its count back (a sliding window and a fixed window).
  const auto key_on = [&](std::size_t master, const std::string& base) {
    for (int i = 0;; ++i) {
      const std::string k = base + std::to_string(i);
      if (cluster.master_of(redis::cluster::key_slot("sluice:" + k)) == master) return k;
    }
  };
  policy log = all[2].p, one = all[4].p;
  one.limit = 1;
  const auto a = key_on(0, "log"), b = key_on(1, "quota");
  ASSERT_TRUE(lim.check(b, one).allowed);  // b's quota is used up
  for (int i = 0; i < 3; ++i) {
    const auto ds = lim.check_all(std::vector<check_item>{{a, log, 4}, {b, one, 1}});
    ASSERT_EQ(ds.size(), 2u);
    EXPECT_FALSE(ds[1].allowed);
  }
  // Had the refunds failed, three calls would have spent 12 > 10 of a's window.
  EXPECT_TRUE(lim.check(a, log, 10).allowed);
}

// peek, refund, penalize, reset and block on one key, as a user sees them through the
// limiter: the same answers for every algorithm on every backend.
void key_operations_on(limiter& lim, const std::string& where) {
  for (const auto& [name, p] : ten_per_long_while()) {
    SCOPED_TRACE(where + " " + name);
    const std::string key = "ops:" + std::string(name);
    std::error_code ec;
    ASSERT_TRUE(lim.check(key, p, 4).allowed);
    for (int i = 0; i < 3; ++i) {  // spends nothing
      const auto d = lim.peek(key, p, 6, ec);
      ASSERT_FALSE(ec) << ec.message();
      EXPECT_FALSE(d.degraded) << d.backend_error.message();
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.remaining, 6u);
    }
    EXPECT_FALSE(lim.peek(key, p, 7).allowed);
    EXPECT_EQ(lim.check(key, p, 6).remaining, 0u);

    auto d = lim.refund(key, p, 3, ec);  // what a check of 1 sees after
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 3u);

    d = lim.penalize(key, p, 10, ec);  // below zero: the client waits longer
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 0u);
    EXPECT_GT(d.retry_after, 0ms);
    EXPECT_FALSE(lim.check(key, p, 1).allowed);

    d = lim.reset(key, p, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.remaining, 10u);
    EXPECT_EQ(lim.check(key, p, 10).remaining, 0u);

    d = lim.block(key, p, 60s, ec);
    ASSERT_FALSE(ec) << ec.message();
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.retry_after, 60s);
    lim.reset(key, p, ec);
    d = lim.block(key, p, 60s, ec);  // whatever the state: a fresh key is blocked too
    const auto c = lim.check(key, p, 1);
    EXPECT_FALSE(c.allowed);
    EXPECT_GT(c.retry_after, 58s);
    EXPECT_LE(c.retry_after, 60s);
    EXPECT_FALSE(lim.peek(key, p, 1).allowed);
    EXPECT_FALSE(lim.refund(key, p, 5, ec).allowed);  // a block is not refunded
    EXPECT_TRUE(lim.reset(key, p, ec).allowed);       // but reset lifts it
    EXPECT_TRUE(lim.check(key, p, 10).allowed);

    // Bad amounts are refused before any backend.
    lim.refund(key, p, 11, ec);
    EXPECT_EQ(ec, errc::cost_exceeds_capacity);
    lim.block(key, p, 0ms, ec);
    EXPECT_EQ(ec, errc::invalid_duration);
  }
}

TEST(AlgorithmBackendsTest, KeyOperationsOnMemoryAndRedis) {
  limiter in_memory = limiter::in_memory();
  key_operations_on(in_memory, "memory");
  redis_server redis;
  limiter on_redis(redis_at(redis.url()));
  key_operations_on(on_redis, "redis");
}

TEST(AlgorithmBackendsTest, KeyOperationsOnCluster) {
  redis_cluster cluster;
  limiter lim = on_cluster(cluster);
  lim.check("warm-up", ten_per_long_while()[0].p);
  key_operations_on(lim, "cluster");
}

TEST(AlgorithmBackendsTest, FailureModesSpeakEachAlgorithmsTerms) {
  // Nothing listens on this port: every call fails fast and the failure mode decides.
  redis_options o;
  o.url = "redis://127.0.0.1:1";
  o.command_timeout = 100ms;
  o.connect_timeout = 100ms;
  limiter lim(make_redis_backend(o.url, o));
  policy p;
  p.algorithm = algorithm::sliding_window;
  p.limit = 5;
  p.window = 1min;
  p.on_failure = failure_mode::closed;
  auto d = lim.check("down", p, 2);
  EXPECT_TRUE(d.degraded);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.limit, 5u);
  EXPECT_EQ(d.retry_after, 1min);  // as if the window were full
  p.on_failure = failure_mode::open;
  d = lim.check("down", p, 2);
  EXPECT_TRUE(d.degraded);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 3u);
  EXPECT_EQ(d.reset_after, 1min);
  p.on_failure = failure_mode::local;  // the memory backend decides, with the same math
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(lim.check("down", p, 2).allowed);
  d = lim.check("down", p, 2);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 1u);
}

}  // namespace
}  // namespace sluice::test
