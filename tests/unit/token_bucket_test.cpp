// The pure token-bucket step: exact integer math, no clock.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>

#include "algorithm/token_bucket.hpp"

namespace sluice::detail {
namespace {

constexpr std::int64_t ut = micro_tokens_per_token;

token_bucket_params params(std::uint64_t capacity, double rate, std::uint64_t cost = 1) {
  policy p;
  p.capacity = capacity;
  p.refill_per_second = rate;
  return to_params(p, cost);
}

// Runs one decision and stores the outcome the way every backend does.
struct bucket {
  token_bucket_params p;
  std::optional<token_bucket_state> state;
  token_bucket_outcome take(std::int64_t now_ms) {
    auto o = token_bucket_decide(p, state, now_ms);
    if (o.allowed) state = o.next;
    return o;
  }
};

TEST(TokenBucketTest, ConvertsPolicyToExactIntegerUnits) {
  const auto p = params(10, 0.1, 3);
  EXPECT_EQ(p.capacity_ut, 10 * ut);
  EXPECT_EQ(p.rate_ut_per_ms, 100);  // 0.1 tokens/s = 100 milli-tokens/s
  EXPECT_EQ(p.cost_ut, 3 * ut);
}

TEST(TokenBucketTest, AdmitsABurstUpToCapacityThenDenies) {
  bucket b{params(5, 1), std::nullopt};
  for (int i = 4; i >= 0; --i) {
    const auto o = b.take(1000);
    ASSERT_TRUE(o.allowed);
    EXPECT_EQ(o.remaining_ut, i * ut);
    EXPECT_EQ(o.retry_after_ms, 0);
  }
  const auto denied = b.take(1000);
  EXPECT_FALSE(denied.allowed);
  EXPECT_EQ(denied.remaining_ut, 0);
  EXPECT_EQ(denied.retry_after_ms, 1000);  // one token at 1 token/s
  EXPECT_EQ(denied.reset_after_ms, 5000);
}

TEST(TokenBucketTest, RetryAfterIsExactTimeUntilCostTokensExist) {
  bucket b{params(10, 4, 3), std::nullopt};  // 4 tokens/s, each request costs 3
  b.take(0);
  b.take(0);
  b.take(0);  // 1 token left
  auto o = b.take(0);
  ASSERT_FALSE(o.allowed);
  EXPECT_EQ(o.retry_after_ms, 500);  // 2 more tokens at 4/s
  o = b.take(499);
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.retry_after_ms, 1);
  EXPECT_TRUE(b.take(500).allowed);
}

TEST(TokenBucketTest, RetryAfterRoundsUpPartialMilliseconds) {
  bucket b{params(1, 3), std::nullopt};  // one token every 333.33 ms
  ASSERT_TRUE(b.take(0).allowed);
  const auto o = b.take(0);
  EXPECT_EQ(o.retry_after_ms, 334);
  EXPECT_FALSE(b.take(333).allowed);
  EXPECT_TRUE(b.take(334).allowed);
}

TEST(TokenBucketTest, RefillDoesNotDriftOverManySmallSteps) {
  // 3 tokens/s (333.33 ms a token) checked every millisecond for 100 s admits exactly 300
  // refilled tokens after the initial 1000: no rounding is lost on the way. The bucket is
  // drained first so it never reaches capacity (where refill is rightly wasted).
  bucket b{params(1000, 3), std::nullopt};
  int allowed = 0;
  for (int i = 0; i < 1000; ++i) allowed += b.take(0).allowed ? 1 : 0;
  for (std::int64_t t = 1; t <= 100'000; ++t) allowed += b.take(t).allowed ? 1 : 0;
  EXPECT_EQ(allowed, 1300);
}

TEST(TokenBucketTest, FractionalRatesRefillExactly) {
  bucket b{params(1, 0.1), std::nullopt};  // one token per 10 s
  ASSERT_TRUE(b.take(0).allowed);
  auto o = b.take(1);
  EXPECT_EQ(o.retry_after_ms, 9999);
  EXPECT_FALSE(b.take(9999).allowed);
  EXPECT_TRUE(b.take(10'000).allowed);
}

TEST(TokenBucketTest, ResetAfterIsTimeUntilFull) {
  bucket b{params(10, 2), std::nullopt};
  const auto o = b.take(0);
  EXPECT_EQ(o.reset_after_ms, 500);
  EXPECT_EQ(b.take(0).reset_after_ms, 1000);
  EXPECT_EQ(b.take(250).reset_after_ms, 1250);  // 8.5 - 1 = 7.5 left: 2.5 tokens to go
}

TEST(TokenBucketTest, RefillStopsAtCapacity) {
  bucket b{params(3, 1000), std::nullopt};
  b.take(0);
  // Hours later the bucket holds capacity, not more.
  const auto o = b.take(10'000'000);
  EXPECT_EQ(o.remaining_ut, 2 * ut);
}

TEST(TokenBucketTest, HugeElapsedTimeAtTheHighestRateDoesNotOverflow) {
  bucket b{params(max_capacity, max_refill_per_second, max_capacity), std::nullopt};
  ASSERT_TRUE(b.take(0).allowed);
  const auto o = b.take(4'000'000'000'000);  // ~127 years later
  EXPECT_TRUE(o.allowed);
  EXPECT_EQ(o.remaining_ut, 0);
}

TEST(TokenBucketTest, ClockGoingBackwardsRefillsNothing) {
  bucket b{params(2, 1), std::nullopt};
  b.take(10'000);
  b.take(10'000);
  auto o = b.take(5'000);  // earlier than the stored state
  EXPECT_FALSE(o.allowed);
  EXPECT_EQ(o.retry_after_ms, 1000);
  EXPECT_TRUE(b.take(11'000).allowed);
}

TEST(TokenBucketTest, LoweredCapacityCapsTheStoredLevel) {
  bucket b{params(100, 1), std::nullopt};
  b.take(0);  // 99 left
  b.p = params(5, 1);
  const auto o = b.take(0);
  ASSERT_TRUE(o.allowed);
  EXPECT_EQ(o.remaining_ut, 4 * ut);
}

TEST(TokenBucketTest, DenialLeavesNothingToStore) {
  bucket b{params(1, 1), std::nullopt};
  b.take(0);
  const auto before = b.state;
  EXPECT_FALSE(b.take(10).allowed);
  ASSERT_TRUE(b.state && before);
  EXPECT_EQ(b.state->level_ut, before->level_ut);
  EXPECT_EQ(b.state->ts_ms, before->ts_ms);
}

TEST(TokenBucketTest, DecisionCarriesWholeTokensAndDurations) {
  bucket b{params(10, 3, 4), std::nullopt};
  const auto d = to_decision(b.take(0), 10);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.limit, 10u);
  EXPECT_EQ(d.remaining, 6u);
  EXPECT_EQ(d.reset_after.count(), 1334);  // 4 tokens at 3/s = 1333.3 ms
  EXPECT_FALSE(d.degraded);
}

}  // namespace
}  // namespace sluice::detail
