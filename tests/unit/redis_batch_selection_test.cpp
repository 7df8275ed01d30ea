// Which waiting requests of a connection's queue leave together (src/redis/batch_selection.hpp),
// with plain values: no connection, no lock, no clock.
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "redis/batch_selection.hpp"

namespace sluice::redis {
namespace {

struct item {
  std::string name;
  std::uint16_t slot = 0;
  bool opaque = false;
};

item d(std::string name, std::uint16_t slot = 0) { return {std::move(name), slot, false}; }
item call(std::string name) { return {std::move(name), 0, true}; }

std::vector<std::string> take(std::deque<item>& q, std::size_t max_batch, bool by_slot) {
  std::vector<std::string> names;
  for (auto& i : redis::take_batch(
           q, max_batch, by_slot, [](const item& i) { return i.opaque; },
           [](const item& i) { return i.slot; })) {
    names.push_back(i.name);
  }
  return names;
}

std::vector<std::string> names_of(const std::deque<item>& q) {
  std::vector<std::string> names;
  for (const auto& i : q) names.push_back(i.name);
  return names;
}

using names = std::vector<std::string>;

TEST(RedisBatchSelectionTest, DecisionsLeaveTogetherUpToMaxBatchInOrder) {
  std::deque<item> q{d("a"), d("b"), d("c"), d("d"), d("e")};
  EXPECT_EQ(take(q, 3, false), (names{"a", "b", "c"}));
  EXPECT_EQ(take(q, 3, false), (names{"d", "e"}));
  EXPECT_TRUE(q.empty());
}

TEST(RedisBatchSelectionTest, MaxBatchOneSendsEachAlone) {
  std::deque<item> q{d("a"), d("b")};
  EXPECT_EQ(take(q, 1, false), (names{"a"}));
  EXPECT_EQ(take(q, 1, true), (names{"b"}));
}

TEST(RedisBatchSelectionTest, AnOpaqueCallLeavesAloneAndKeepsItsPlace) {
  std::deque<item> q{d("a"), d("b"), call("x"), d("c"), call("y"), call("z"), d("e")};
  EXPECT_EQ(take(q, 32, false), (names{"a", "b"}));  // not past x
  EXPECT_EQ(take(q, 32, false), (names{"x"}));
  EXPECT_EQ(take(q, 32, false), (names{"c"}));
  EXPECT_EQ(take(q, 32, false), (names{"y"}));
  EXPECT_EQ(take(q, 32, false), (names{"z"}));
  EXPECT_EQ(take(q, 32, false), (names{"e"}));
}

TEST(RedisBatchSelectionTest, OnAClusterABatchHoldsOneSlotAndThePassedOverKeepTheirOrder) {
  std::deque<item> q{d("a1", 1), d("b2", 2), d("a2", 1), d("c3", 3), d("a3", 1), d("b4", 2)};
  EXPECT_EQ(take(q, 32, true), (names{"a1", "a2", "a3"}));
  EXPECT_EQ(names_of(q), (names{"b2", "c3", "b4"}));
  EXPECT_EQ(take(q, 32, true), (names{"b2", "b4"}));
  EXPECT_EQ(take(q, 32, true), (names{"c3"}));
}

TEST(RedisBatchSelectionTest, OnAClusterNothingIsTakenFromPastAnOpaqueCall) {
  std::deque<item> q{d("a1", 1), d("a2", 1), call("x"), d("a3", 1)};
  EXPECT_EQ(take(q, 32, true), (names{"a1", "a2"}));
  EXPECT_EQ(names_of(q), (names{"x", "a3"}));
}

TEST(RedisBatchSelectionTest, OnAClusterMaxBatchBoundsTheSlotsBatch) {
  std::deque<item> q{d("a1", 1), d("a2", 1), d("b", 2), d("a3", 1)};
  EXPECT_EQ(take(q, 2, true), (names{"a1", "a2"}));
  EXPECT_EQ(names_of(q), (names{"b", "a3"}));
}

TEST(RedisBatchSelectionTest, OnAClusterTheSearchLooksOnlySoFar) {
  std::deque<item> q{d("first", 7)};
  for (std::size_t i = 0; i < slot_search; ++i) q.push_back(d("other", 8));
  q.push_back(d("too far", 7));
  EXPECT_EQ(take(q, 32, true), (names{"first"}));
  EXPECT_EQ(q.size(), slot_search + 1);
  EXPECT_EQ(q.back().name, "too far");
}

}  // namespace
}  // namespace sluice::redis
