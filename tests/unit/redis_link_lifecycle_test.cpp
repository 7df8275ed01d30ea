// A connection's life cycle (src/redis/link_lifecycle.hpp) driven without a socket or a
// timer: the events are reported by hand, as the connection would, and each answer (state,
// warn or not, how long until the next attempt) is checked.
#include <chrono>
#include <cstdint>

#include <gtest/gtest.h>

#include "redis/link_lifecycle.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::redis::link_lifecycle;
using sluice::redis::link_state;

constexpr auto min_backoff = 100ms;
constexpr auto max_backoff = 1000ms;

link_lifecycle make(std::uint32_t seed = 1) { return {min_backoff, max_backoff, seed}; }

TEST(RedisLinkLifecycleTest, StartsConnectingAndComesUp) {
  auto life = make();
  EXPECT_EQ(life.state(), link_state::connecting);
  life.connected();
  EXPECT_EQ(life.state(), link_state::up);
  EXPECT_EQ(life.failed_attempts(), 0u);
}

TEST(RedisLinkLifecycleTest, AFailedFirstAttemptGoesDownWarnsOnceAndNeverRetriesAtOnce) {
  auto life = make();
  const auto f = life.attempt_failed();
  ASSERT_TRUE(f);
  EXPECT_EQ(life.state(), link_state::down);  // the breaker: requests now fail at once
  EXPECT_TRUE(f->first);
  // backoff_delay(1) = min_backoff, jittered into [min/2, min].
  EXPECT_GE(f->retry_in, min_backoff / 2);
  EXPECT_LE(f->retry_in, min_backoff);
  const auto again = life.attempt_failed();
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->first);  // routine while Redis stays away: not a second warning
  EXPECT_EQ(life.failed_attempts(), 2u);
}

TEST(RedisLinkLifecycleTest, BackoffDoublesUpToTheMaximumWithJitterInTheUpperHalf) {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    auto life = make(seed);
    auto expected = min_backoff;
    for (int i = 0; i < 8; ++i) {
      const auto f = life.attempt_failed();
      ASSERT_TRUE(f);
      EXPECT_GE(f->retry_in, expected / 2) << "seed " << seed << " failure " << i;
      EXPECT_LE(f->retry_in, expected) << "seed " << seed << " failure " << i;
      expected = std::min(expected * 2, max_backoff);
    }
  }
}

TEST(RedisLinkLifecycleTest, JitterSpreadsClientsThatFailTogether) {
  // Two clients that lost one server must not come back in lockstep.
  bool differed = false;
  for (std::uint32_t seed = 1; seed <= 20 && !differed; ++seed) {
    auto a = make(seed);
    auto b = make(seed + 1000);
    for (int i = 0; i < 4; ++i)
      differed |= a.attempt_failed()->retry_in != b.attempt_failed()->retry_in;
  }
  EXPECT_TRUE(differed);
}

TEST(RedisLinkLifecycleTest, ALostConnectionRetriesAtOnceThenBacksOff) {
  auto life = make();
  life.connected();
  const auto lost = life.lost();
  ASSERT_TRUE(lost);
  EXPECT_EQ(life.state(), link_state::down);
  EXPECT_TRUE(lost->first);
  EXPECT_EQ(lost->retry_in, 0ms);  // a restarted server is usually back already
  const auto retry = life.attempt_failed();
  ASSERT_TRUE(retry);
  EXPECT_FALSE(retry->first);
  EXPECT_GE(retry->retry_in, min_backoff / 2);
  EXPECT_LE(retry->retry_in, min_backoff);
}

TEST(RedisLinkLifecycleTest, ComingUpForgetsTheBackoff) {
  auto life = make();
  for (int i = 0; i < 6; ++i) life.attempt_failed();
  life.connected();
  EXPECT_EQ(life.failed_attempts(), 0u);
  EXPECT_EQ(life.lost()->retry_in, 0ms);
  const auto f = life.attempt_failed();
  EXPECT_LE(f->retry_in, min_backoff);
}

TEST(RedisLinkLifecycleTest, RetargetConnectsAtOnceWithTheBackoffForgotten) {
  auto life = make();
  for (int i = 0; i < 6; ++i) life.attempt_failed();
  EXPECT_TRUE(life.retarget());
  EXPECT_EQ(life.state(), link_state::connecting);  // requests wait for the new master
  const auto f = life.attempt_failed();
  ASSERT_TRUE(f);
  EXPECT_TRUE(f->first);
  EXPECT_LE(f->retry_in, min_backoff);
}

TEST(RedisLinkLifecycleTest, StoppedIsFinal) {
  auto life = make();
  life.connected();
  life.stop();
  EXPECT_EQ(life.state(), link_state::stopped);
  EXPECT_FALSE(life.lost());
  EXPECT_FALSE(life.attempt_failed());
  EXPECT_FALSE(life.retarget());
  life.connected();  // a handshake that finishes after stop() changes nothing
  EXPECT_EQ(life.state(), link_state::stopped);
}

}  // namespace
