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
  static decision decide(backend& b, std::string_view key, const policy& p, std::uint64_t cost = 1) {
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
  for (int i = 0; i < 100; ++i) still_limited += decide(*b, "k" + std::to_string(i), slow).allowed ? 0 : 1;
  EXPECT_LE(still_limited, 4);
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
  for (int i = 0; i < 40; ++i) EXPECT_FALSE(decide(*b, "slow" + std::to_string(i), slow).allowed) << i;
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
