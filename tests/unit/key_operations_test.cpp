// Key operations (peek, reset, refund, penalize, block) on the memory backend with a
// manual clock: exact numbers a user relies on. Redis runs the same math (the random
// histories of tests/integration/redis_script_test.cpp include every operation).
#include <gtest/gtest.h>

#include <sluice/sluice.hpp>

#include <chrono>
#include <memory>

#include "support/policies.hpp"

namespace {

using namespace sluice;
using namespace std::chrono_literals;

struct fixture {
  std::shared_ptr<manual_clock> clock = std::make_shared<manual_clock>(std::chrono::seconds{1'000'000});
  limiter lim{make_memory_backend({.time_source = clock})};
};

using sluice::test::bucket;
using sluice::test::window;

TEST(KeyOperationsTest, PenaltyTakesABucketBelowZeroAndTheWaitIsExact) {
  for (auto a : {algorithm::token_bucket, algorithm::gcra}) {
    SCOPED_TRACE(std::string(to_string(a)));
    fixture f;
    const auto p = bucket(a, 10, 10);  // a token per 100 ms
    std::error_code ec;
    const auto d = f.lim.penalize("k", p, 10, ec);  // full, then 10 owed: empty
    ASSERT_FALSE(ec);
    EXPECT_TRUE(d.allowed == false || d.remaining == 0);
    f.lim.penalize("k", p, 5, ec);  // 5 below zero
    const auto c = f.lim.check("k", p, 1);
    EXPECT_FALSE(c.allowed);
    EXPECT_EQ(c.retry_after, 600ms);  // 6 tokens at 10/s
    EXPECT_EQ(c.reset_after, 1500ms);  // 15 tokens to full
    // A debt is bounded by one burst: however often penalized, full again within 2 x 1 s.
    for (int i = 0; i < 10; ++i) f.lim.penalize("k", p, 10, ec);
    EXPECT_EQ(f.lim.check("k", p, 1).reset_after, 2000ms);
    f.clock->advance(1999ms);
    EXPECT_EQ(f.lim.peek("k", p, 10).allowed, false);
    f.clock->advance(1ms);
    EXPECT_TRUE(f.lim.check("k", p, 10).allowed);
  }
}

TEST(KeyOperationsTest, RefundNeverGivesMoreThanNothingSpent) {
  fixture f;
  for (const auto& p : {bucket(algorithm::token_bucket, 5, 1), bucket(algorithm::gcra, 5, 1),
                        window(algorithm::fixed_window, 5, 1min),
                        window(algorithm::sliding_window_counter, 5, 1min),
                        window(algorithm::sliding_window, 5, 1min)}) {
    SCOPED_TRACE(std::string(to_string(p.algorithm)));
    const std::string key = "r:" + std::string(to_string(p.algorithm));
    std::error_code ec;
    EXPECT_EQ(f.lim.check(key, p, 2).remaining, 3u);
    EXPECT_EQ(f.lim.refund(key, p, 5, ec).remaining, 5u);
    EXPECT_FALSE(ec);
    EXPECT_TRUE(f.lim.check(key, p, 5).allowed);
    EXPECT_FALSE(f.lim.check(key, p, 1).allowed);
  }
}

TEST(KeyOperationsTest, BlockDeniesForItsLengthThenTheKeyStartsAfresh) {
  fixture f;
  const auto p = window(algorithm::fixed_window, 3, 24h);
  std::error_code ec;
  EXPECT_TRUE(f.lim.check("b", p, 3).allowed);  // used up for the day
  auto d = f.lim.block("b", p, 1500ms, ec);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 1500ms);
  f.clock->advance(1000ms);
  d = f.lim.check("b", p, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after, 500ms);
  f.clock->advance(499ms);
  EXPECT_FALSE(f.lim.check("b", p, 1).allowed);
  f.clock->advance(1ms);
  // The block replaced the day's count: afresh.
  d = f.lim.check("b", p, 3);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
}

TEST(KeyOperationsTest, ResetForgetsStateAndCachedDenials) {
  fixture f;
  auto p = bucket(algorithm::token_bucket, 2, 0.001);
  p.cache_denials = true;
  EXPECT_TRUE(f.lim.check("c", p, 2).allowed);
  EXPECT_FALSE(f.lim.check("c", p, 1).allowed);  // remembered in-process
  std::error_code ec;
  EXPECT_EQ(f.lim.reset("c", p, ec).remaining, 2u);
  EXPECT_TRUE(f.lim.check("c", p, 1).allowed);  // the cached denial went with the state
}

TEST(KeyOperationsTest, PeekAnswersAsCheckWithoutSpending) {
  fixture f;
  const auto p = window(algorithm::sliding_window, 4, 10s);
  EXPECT_TRUE(f.lim.check("p", p, 3).allowed);
  f.clock->advance(2s);
  for (int i = 0; i < 5; ++i) {
    const auto d = f.lim.peek("p", p, 2);
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.remaining, 1u);
    EXPECT_EQ(d.retry_after, 8s);  // the first 3 leave the window
  }
  EXPECT_TRUE(f.lim.check("p", p, 1).allowed);
  std::error_code ec;
  f.lim.peek("p", p, 5, ec);
  EXPECT_EQ(ec, errc::cost_exceeds_capacity);
}

}  // namespace
