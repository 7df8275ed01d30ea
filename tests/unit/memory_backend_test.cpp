// The memory backend on a manual clock: exact counts, isolation, expiry, the memory bound.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <sluice/memory_backend.hpp>

namespace sluice {
namespace {

using std::chrono::milliseconds;

policy bucket(std::uint64_t capacity, double rate) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  return p;
}

class MemoryBackendTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> make(std::size_t max_keys = 1'000'000, std::size_t shards = 64) {
    return make_memory_backend({.shards = shards, .max_keys = max_keys, .time_source = clock_});
  }
  static decision decide(backend& b, std::string_view key, const policy& p,
                         std::uint64_t cost = 1) {
    decision d;
    EXPECT_FALSE(b.decide(key, p, cost, d));
    return d;
  }
};

TEST_F(MemoryBackendTest, BurstThenRefillOnTheInjectedClock) {
  auto b = make();
  const auto p = bucket(3, 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(decide(*b, "k", p).allowed);
  auto d = decide(*b, "k", p);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, milliseconds{500});
  EXPECT_EQ(d.reset_after, milliseconds{1500});
  clock_->advance(milliseconds{499});
  EXPECT_FALSE(decide(*b, "k", p).allowed);
  clock_->advance(milliseconds{1});
  d = decide(*b, "k", p);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
}

TEST_F(MemoryBackendTest, KeysAreIndependent) {
  auto b = make();
  const auto p = bucket(1, 1);
  EXPECT_TRUE(decide(*b, "a", p).allowed);
  EXPECT_FALSE(decide(*b, "a", p).allowed);
  EXPECT_TRUE(decide(*b, "b", p).allowed);
}

TEST_F(MemoryBackendTest, CostSpendsSeveralTokens) {
  auto b = make();
  const auto p = bucket(10, 1);
  auto d = decide(*b, "k", p, 7);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 3u);
  d = decide(*b, "k", p, 4);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 3u);
  EXPECT_EQ(d.retry_after, milliseconds{1000});
}

TEST_F(MemoryBackendTest, MemoryBoundForgetsBucketsThatAreFullAgainFirst) {
  // One shard holding at most 2 keys: "busy" stays empty while "idle" refills fully.
  auto b = make(2, 1);
  const auto slow = bucket(1, 0.001);  // 1000 s per token
  const auto fast = bucket(1, 1000);   // full again after 1 ms
  EXPECT_TRUE(decide(*b, "busy", slow).allowed);
  EXPECT_TRUE(decide(*b, "idle", fast).allowed);
  clock_->advance(milliseconds{5});
  // A third key needs room: "idle" is full again and goes, "busy" keeps its empty bucket.
  EXPECT_TRUE(decide(*b, "new", fast).allowed);
  EXPECT_FALSE(decide(*b, "busy", slow).allowed);
}

TEST_F(MemoryBackendTest, MemoryBoundHoldsWhenEveryBucketIsBusy) {
  // Past the bound with nothing refilled, an arbitrary bucket is forgotten: the bound wins
  // over exactness for that key, and the map never grows past max_keys.
  auto b = make(4, 1);
  const auto slow = bucket(1, 0.001);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(decide(*b, "k" + std::to_string(i), slow).allowed);
  int still_limited = 0;
  for (int i = 0; i < 100; ++i)
    still_limited += decide(*b, "k" + std::to_string(i), slow).allowed ? 0 : 1;
  EXPECT_LE(still_limited, 4);
}

TEST_F(MemoryBackendTest, FullMapForgetsFullBucketsAndKeepsTheSpentOne) {
  // 64 keys in one shard: one spent out, 63 full again. 63 new keys take the full ones'
  // places; the spent one stays exact and no live key was forgotten.
  auto b = make(64, 1);
  const auto slow = bucket(3, 0.001);
  const auto fast = bucket(3, 1000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(decide(*b, "victim", slow).allowed);
  for (int i = 0; i < 63; ++i) ASSERT_TRUE(decide(*b, "full" + std::to_string(i), fast).allowed);
  clock_->advance(milliseconds{5});
  for (int i = 0; i < 63; ++i) ASSERT_TRUE(decide(*b, "new" + std::to_string(i), slow).allowed);
  EXPECT_FALSE(decide(*b, "victim", slow).allowed);
  EXPECT_EQ(b->stats().evicted_live, 0u);
  EXPECT_EQ(b->stats().keys, 64u);
}

TEST_F(MemoryBackendTest, EveryKeyLiveCountsTheEvictionAndKeepsTheMostSpent) {
  // An attacker's flood of new keys, each spending one token of the victim's own policy:
  // every key is live, so keys are forgotten and counted, but the one nearest to full goes
  // first, never the spent-out victim.
  auto b = make(64, 1);
  const auto p = bucket(10, 0.01);
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(decide(*b, "victim", p).allowed);
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(decide(*b, "attacker" + std::to_string(i), p).allowed);
    clock_->advance(milliseconds{1});
  }
  const auto d = decide(*b, "victim", p);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_GE(b->stats().evicted_live, 5000u - 64u);
  EXPECT_LE(b->stats().keys, 64u);
}

TEST_F(MemoryBackendTest, FullMapForgetsEndedWindowsAndPastGcraStateFirst) {
  // The same for the other algorithms: a fixed window whose window ended and a GCRA key
  // whose TAT has passed decide as new keys; the spent ones of each stay exact.
  auto b = make(64, 1);
  policy window;
  window.algorithm = algorithm::fixed_window;
  window.limit = 2;
  window.window = milliseconds{1000};
  policy gcra = bucket(2, 0.001);
  gcra.algorithm = algorithm::gcra;
  policy short_window = window;
  short_window.window = milliseconds{2};
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(decide(*b, "window", window).allowed);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(decide(*b, "gcra", gcra).allowed);
  for (int i = 0; i < 62; ++i)
    ASSERT_TRUE(decide(*b, "short" + std::to_string(i), short_window).allowed);
  clock_->advance(milliseconds{10});
  for (int i = 0; i < 62; ++i) ASSERT_TRUE(decide(*b, "new" + std::to_string(i), window).allowed);
  EXPECT_FALSE(decide(*b, "window", window).allowed);
  EXPECT_FALSE(decide(*b, "gcra", gcra).allowed);
  EXPECT_EQ(b->stats().evicted_live, 0u);
}

TEST_F(MemoryBackendTest, ASmallBoundHoldsThatManyBusyBuckets) {
  // max_keys 10 with the default 64 shards: every one of 10 exhausted buckets stays exact
  // (one shard per key would let two keys of a shard push each other out).
  auto b = make(10);
  const auto slow = bucket(1, 0.001);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(decide(*b, "k" + std::to_string(i), slow).allowed);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(decide(*b, "k" + std::to_string(i), slow).allowed) << i;
}

TEST_F(MemoryBackendTest, LongAndSimilarKeysKeepTheirOwnBuckets) {
  // Keys past the inline size live on the heap; keys sharing long prefixes or differing only
  // in their last byte must never share a bucket, across table growth and expiry sweeps.
  auto b = make(100'000, 4);
  const auto p = bucket(1, 0.001);
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) {
    keys.push_back(std::string(static_cast<std::size_t>(i % 70), 'x') + "/" + std::to_string(i));
  }
  for (const auto& k : keys) ASSERT_TRUE(decide(*b, k, p).allowed) << k;
  for (const auto& k : keys) ASSERT_FALSE(decide(*b, k, p).allowed) << k;
}

TEST_F(MemoryBackendTest, SweepKeepsEveryBusyBucketExact) {
  // 2 shards of 50 keys: half the keys refill within 1 ms, half take 1000 s. Once the fast
  // ones are full again, new keys take their place and every slow bucket keeps its state.
  auto b = make(100, 2);
  const auto slow = bucket(1, 0.001);
  const auto fast = bucket(1, 1000);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(decide(*b, "slow" + std::to_string(i), slow).allowed);
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(decide(*b, "fast" + std::to_string(i), fast).allowed);
  clock_->advance(milliseconds{2});
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(decide(*b, "new" + std::to_string(i), fast).allowed);
  for (int i = 0; i < 40; ++i)
    EXPECT_FALSE(decide(*b, "slow" + std::to_string(i), slow).allowed) << i;
}

TEST_F(MemoryBackendTest, ConcurrentCallersOnOneKeyAdmitExactlyCapacity) {
  auto b = make();
  const auto p = bucket(100, 0.001);
  std::atomic<int> allowed{0};
  std::vector<std::jthread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        decision d;
        b->decide("shared", p, 1, d);
        if (d.allowed) allowed.fetch_add(1);
      }
    });
  }
  threads.clear();
  EXPECT_EQ(allowed.load(), 100);
}

TEST_F(MemoryBackendTest, AsyncDecideCompletesWithTheSameDecision) {
  auto b = make();
  const auto p = bucket(1, 1);
  int calls = 0;
  b->async_decide("k", p, 1, [&](std::error_code ec, decision d) {
    ++calls;
    EXPECT_FALSE(ec);
    EXPECT_TRUE(d.allowed);
  });
  b->async_decide("k", p, 1, [&](std::error_code, decision d) {
    ++calls;
    EXPECT_FALSE(d.allowed);
  });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

using std::chrono::milliseconds;

policy limit(std::uint64_t capacity, double rate) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  return p;
}

class MemoryDecideAllTest : public ::testing::Test {
 protected:
  std::shared_ptr<manual_clock> clock_ = std::make_shared<manual_clock>();
  std::shared_ptr<backend> b_ = make_memory_backend({.time_source = clock_});
  std::vector<decision> all(std::vector<check_item> items) {
    std::vector<decision> out;
    EXPECT_FALSE(b_->decide_all(items, out));
    EXPECT_EQ(out.size(), items.size());
    return out;
  }
  std::uint64_t remaining(std::string_view key, const policy& p) { return remaining(*b_, key, p); }
  static std::uint64_t remaining(backend& b, std::string_view key, const policy& p) {
    // A denied probe spends nothing and reports the whole tokens there are.
    decision d;
    EXPECT_FALSE(b.decide(key, p, p.capacity, d));
    if (d.allowed) {
      ADD_FAILURE() << "probe of " << key << " was admitted";
      return p.capacity;
    }
    return d.remaining;
  }
};

TEST_F(MemoryDecideAllTest, OneDenialSpendsNothingAnywhere) {
  const auto a = limit(10, 1), b = limit(2, 0.5);
  decision d;
  ASSERT_FALSE(b_->decide("b", b, 2, d));  // b is empty now
  const auto ds = all({{"a", a, 3}, {"b", b, 1}});
  EXPECT_FALSE(all_allowed(ds));
  // a would have allowed: it says so, and it still holds all 10 tokens.
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_EQ(ds[0].remaining, 10u);
  EXPECT_EQ(ds[0].retry_after, milliseconds{0});
  EXPECT_EQ(ds[0].reset_after, milliseconds{0});
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[1].remaining, 0u);
  EXPECT_EQ(ds[1].retry_after, milliseconds{2000});  // one token at 0.5/s
  EXPECT_EQ(ds[1].reset_after, milliseconds{4000});
  // Nothing was spent: 10 left in a (as a 10-token request shows)...
  ASSERT_FALSE(b_->decide("a", a, 10, d));
  EXPECT_TRUE(d.allowed);
  // ...and after exactly retry_after the same call is admitted.
  clock_->advance(milliseconds{2000});
  const auto again = all({{"a2", a, 3}, {"b", b, 1}});
  EXPECT_TRUE(all_allowed(again));
  EXPECT_EQ(again[0].remaining, 7u);
  EXPECT_EQ(again[1].remaining, 0u);
}

TEST_F(MemoryDecideAllTest, AllAllowSpendsEveryBucket) {
  const auto a = limit(5, 1), b = limit(3, 1);
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const auto ds = all({{"a", a, 1}, {"b", b, 1}});
    ASSERT_TRUE(all_allowed(ds));
    EXPECT_EQ(ds[0].remaining, 5 - i);
    EXPECT_EQ(ds[1].remaining, 3 - i);
    EXPECT_EQ(ds[1].reset_after, milliseconds{1000 * i});
  }
  const auto ds = all({{"a", a, 1}, {"b", b, 1}});
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(remaining("a", a), 2u);  // the fourth call spent nothing from a
  EXPECT_EQ(remaining("b", b), 0u);
}

TEST_F(MemoryDecideAllTest, DuplicateKeysAddUpAgainstOneBucket) {
  const auto p = limit(5, 1);
  auto ds = all({{"k", p, 2}, {"k", p, 2}});
  ASSERT_TRUE(all_allowed(ds));
  EXPECT_EQ(ds[0].remaining, 3u);  // in order: the second item sees the first's spending
  EXPECT_EQ(ds[1].remaining, 1u);
  EXPECT_EQ(remaining("k", p), 1u);
  // 1 token left: 1 + 1 does not fit, so neither is spent; the retry waits for both.
  ds = all({{"k", p, 1}, {"k", p, 1}});
  EXPECT_TRUE(ds[0].allowed);
  EXPECT_FALSE(ds[1].allowed);
  EXPECT_EQ(ds[0].remaining, 1u);
  EXPECT_EQ(ds[1].remaining, 1u);
  EXPECT_EQ(ds[1].retry_after, milliseconds{1000});
  EXPECT_EQ(remaining("k", p), 1u);
  clock_->advance(milliseconds{1000});
  EXPECT_TRUE(all_allowed(all({{"k", p, 1}, {"k", p, 1}})));
  EXPECT_EQ(remaining("k", p), 0u);
}

TEST_F(MemoryDecideAllTest, ManyKeysOverManyShardsAndOneItem) {
  // More keys than shards, so several share a shard (each shard is locked once).
  auto b = make_memory_backend({.shards = 4, .time_source = clock_});
  const auto p = limit(1, 0.001);
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) keys.push_back("key" + std::to_string(i));
  std::vector<check_item> items;
  for (const auto& k : keys) items.push_back({k, p, 1});
  std::vector<decision> out;
  ASSERT_FALSE(b->decide_all(items, out));
  EXPECT_TRUE(all_allowed(out));
  ASSERT_FALSE(b->decide_all(items, out));
  for (const auto& d : out) EXPECT_FALSE(d.allowed);
  // One item is a plain decision; no item is an empty answer.
  ASSERT_FALSE(b->decide_all(std::vector<check_item>{{"solo", p, 1}}, out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].allowed);
  ASSERT_FALSE(b->decide_all({}, out));
  EXPECT_TRUE(out.empty());
}

TEST_F(MemoryDecideAllTest, ConcurrentCallersWithTwoPoliciesAdmitTheSmallerCapacity) {
  // Every call spends from "wide" (capacity 60) and "narrow" (capacity 25) together, while
  // other threads spend from each alone. All-or-nothing: the pairs admitted plus the lone
  // calls admitted never exceed either bucket, and no bucket loses a token to a denied pair.
  auto b = make_memory_backend({.shards = 8, .time_source = clock_});
  const auto wide = limit(60, 0.001), narrow = limit(25, 0.001);
  std::atomic<int> pairs{0}, wide_alone{0}, narrow_alone{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 6; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 300; ++i) {
          if (t < 4) {
            std::vector<decision> out;
            const std::vector<check_item> items{{"wide", wide, 1}, {"narrow", narrow, 1}};
            ASSERT_FALSE(b->decide_all(items, out));
            if (all_allowed(out)) pairs.fetch_add(1);
          } else {
            decision d;
            const bool w = t == 4;
            b->decide(w ? "wide" : "narrow", w ? wide : narrow, 1, d);
            if (d.allowed) (w ? wide_alone : narrow_alone).fetch_add(1);
          }
        }
      });
    }
  }
  EXPECT_EQ(pairs + narrow_alone, 25);  // narrow is drained exactly
  EXPECT_EQ(remaining(*b, "narrow", narrow), 0u);
  // wide spent exactly what was admitted from it: pairs and lone calls, nothing for denials.
  EXPECT_EQ(remaining(*b, "wide", wide), 60u - static_cast<std::uint64_t>(pairs + wide_alone));
}

TEST_F(MemoryDecideAllTest, ConcurrentPairsAdmitExactlyTheSmallerCapacity) {
  auto b = make_memory_backend({.shards = 8, .time_source = clock_});
  const auto first = limit(40, 0.001), second = limit(15, 0.001);
  std::atomic<int> admitted{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          // Half the threads list the keys the other way round: the lock order must not care.
          std::vector<check_item> items{{"first", first, 1}, {"second", second, 1}};
          if (t % 2) std::swap(items[0], items[1]);
          std::vector<decision> out;
          ASSERT_FALSE(b->decide_all(items, out));
          if (all_allowed(out)) admitted.fetch_add(1);
        }
      });
    }
  }
  EXPECT_EQ(admitted.load(), 15);
  EXPECT_EQ(remaining(*b, "second", second), 0u);
  EXPECT_EQ(remaining(*b, "first", first), 25u);
}

}  // namespace
}  // namespace sluice
