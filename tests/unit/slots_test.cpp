// The concurrency limit's steps (src/algorithm/slots.hpp) on a clock of plain numbers.
#include <gtest/gtest.h>

#include "algorithm/slots.hpp"

namespace sluice::detail {
namespace {

const slot_id a{1, 1}, b{2, 2}, c{3, 3};

TEST(Slots, AtMostLimitHoldAtOnceAndARefusalSaysWhenTheFirstLeaseEnds) {
  slot_table t;
  EXPECT_TRUE(slots_acquire(t, a, 2, 1000, 0).held);
  const auto second = slots_acquire(t, b, 2, 1000, 400);
  EXPECT_TRUE(second.held);
  EXPECT_EQ(second.in_flight, 2);
  EXPECT_EQ(second.expires_in_ms, 1000);
  const auto third = slots_acquire(t, c, 2, 1000, 500);
  EXPECT_FALSE(third.held);
  EXPECT_EQ(third.in_flight, 2);
  EXPECT_EQ(third.retry_after_ms, 500) << "a's lease ends at 1000";
}

TEST(Slots, AnEndedLeaseFreesItsSlotAndCannotBeRenewedOrReleasedAfter) {
  slot_table t;
  slots_acquire(t, a, 1, 100, 0);
  EXPECT_FALSE(slots_acquire(t, b, 1, 100, 99).held);
  EXPECT_TRUE(slots_acquire(t, b, 1, 100, 100).held) << "a's lease ended at 100";
  EXPECT_FALSE(slots_renew(t, a, 100, 101).held);
  const auto r = slots_release(t, a, 102);
  EXPECT_FALSE(r.held) << "releasing an ended slot frees nobody else's";
  EXPECT_EQ(r.in_flight, 1);
}

TEST(Slots, RenewKeepsASlowHolderAndReleaseFreesOnlyItsOwnSlot) {
  slot_table t;
  slots_acquire(t, a, 1, 100, 0);
  for (std::int64_t now = 90; now < 1000; now += 90) ASSERT_TRUE(slots_renew(t, a, 100, now).held);
  EXPECT_FALSE(slots_acquire(t, b, 1, 100, 1000).held);
  EXPECT_FALSE(slots_release(t, b, 1000).held);
  EXPECT_TRUE(slots_release(t, a, 1000).held);
  EXPECT_TRUE(slots_acquire(t, b, 1, 100, 1000).held);
}

TEST(Slots, ALoweredLimitTakesEffectAsSlotsFree) {
  slot_table t;
  for (const auto& id : {a, b, c}) slots_acquire(t, id, 3, 1000, 0);
  EXPECT_FALSE(slots_acquire(t, slot_id{9, 9}, 1, 1000, 1).held);
  slots_release(t, a, 2);
  EXPECT_EQ(slots_renew(t, b, 1000, 3).in_flight, 2) << "holders above the limit keep their slots";
  slots_release(t, b, 4);
  EXPECT_FALSE(slots_acquire(t, a, 1, 1000, 5).held);
  slots_release(t, c, 6);
  EXPECT_TRUE(slots_acquire(t, a, 1, 1000, 7).held);
}

TEST(Slots, ARetriedAcquireTakesOneSlot) {
  slot_table t;
  slots_acquire(t, a, 2, 100, 0);
  const auto again = slots_acquire(t, a, 2, 100, 50);
  EXPECT_TRUE(again.held);
  EXPECT_EQ(again.in_flight, 1);
}

TEST(Slots, IdsAre32HexDigitsBothWays) {
  const slot_id id{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(to_hex(id), "0123456789abcdeffedcba9876543210");
  EXPECT_EQ(parse_slot_id("0123456789ABCDEFfedcba9876543210"), id);
  EXPECT_FALSE(parse_slot_id("0123456789abcdeffedcba987654321"));
  EXPECT_FALSE(parse_slot_id("0123456789abcdeffedcba98765432100"));
  EXPECT_FALSE(parse_slot_id("0123456789abcdeffedcba987654321g"));
  EXPECT_FALSE(parse_slot_id(""));
}

// The parser reads 8 digits at a time: every byte value, at every position, is accepted
// exactly when it is a hex digit, and read as its value.
TEST(SlotsTest, ParsesEveryByteAtEveryPosition) {
  const std::string base(32, '0');
  for (std::size_t at = 0; at < 32; ++at) {
    for (int c = 0; c < 256; ++c) {
      std::string hex = base;
      hex[at] = static_cast<char>(c);
      const bool is_hex =
          (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      const auto id = parse_slot_id(hex);
      ASSERT_EQ(id.has_value(), is_hex) << "byte " << c << " at " << at;
      if (!id) continue;
      const std::uint64_t v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
      const std::uint64_t shifted = v << (4 * (15 - at % 16));
      EXPECT_EQ(*id, (at < 16 ? slot_id{shifted, 0} : slot_id{0, shifted}));
    }
  }
}

}  // namespace
}  // namespace sluice::detail
