// The over-limit cache's bound: lapsed denials make room first; live ones are forgotten
// (counted) only when none has lapsed, which costs that key a backend call, never a wrong
// admission.
#include <gtest/gtest.h>

#include <string>

#include "core/deny_cache.hpp"

namespace sluice::detail {
namespace {

using std::chrono::milliseconds;

policy bucket() {
  policy p;
  p.capacity = 1;
  p.refill_per_second = 1;
  return p;
}

decision denied(milliseconds retry_after) {
  decision d;
  d.allowed = false;
  d.limit = 1;
  d.retry_after = retry_after;
  d.reset_after = retry_after;
  return d;
}

TEST(DenyCacheBoundTest, LapsedDenialsMakeRoomBeforeLiveOnes) {
  auto clock = std::make_shared<manual_clock>();
  deny_cache c(clock, 16, 1);
  const auto p = bucket();
  c.remember("long", p, 1, denied(milliseconds{60'000}));
  for (int i = 0; i < 15; ++i)
    c.remember("short" + std::to_string(i), p, 1, denied(milliseconds{1}));
  clock->advance(milliseconds{5});
  for (int i = 0; i < 15; ++i)
    c.remember("new" + std::to_string(i), p, 1, denied(milliseconds{60'000}));
  EXPECT_EQ(c.evicted(), 0u);
  EXPECT_TRUE(c.lookup("long", p, 1));
  for (int i = 0; i < 15; ++i) EXPECT_TRUE(c.lookup("new" + std::to_string(i), p, 1)) << i;
}

TEST(DenyCacheBoundTest, FullOfLiveDenialsForgetsTheOneLapsingFirstAndCountsIt) {
  auto clock = std::make_shared<manual_clock>();
  deny_cache c(clock, 16, 1);
  const auto p = bucket();
  for (int i = 0; i < 16; ++i)
    c.remember("k" + std::to_string(i), p, 1, denied(milliseconds{60'000 + i}));
  for (int i = 0; i < 1000; ++i)
    c.remember("flood" + std::to_string(i), p, 1, denied(milliseconds{30'000}));
  EXPECT_EQ(c.evicted(), 1000u);
  // Every answer it still gives is a denial that holds; the rest go to the backend.
  int held = 0;
  for (int i = 0; i < 1000; ++i) held += c.lookup("flood" + std::to_string(i), p, 1) ? 1 : 0;
  for (int i = 0; i < 16; ++i) held += c.lookup("k" + std::to_string(i), p, 1) ? 1 : 0;
  EXPECT_LE(held, 16);
  EXPECT_GE(held, 1);
}

}  // namespace
}  // namespace sluice::detail
