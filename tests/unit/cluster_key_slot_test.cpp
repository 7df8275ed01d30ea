// Redis Cluster key slots: CRC16 (XMODEM) and the {hash tag} rules of the cluster spec.
#include <gtest/gtest.h>

#include <string>

#include "redis/cluster/key_slot.hpp"

namespace sluice::redis::cluster {
namespace {

TEST(ClusterKeySlotTest, Crc16MatchesTheSpecCheckValue) {
  // The cluster specification: the CRC16 of "123456789" is 0x31C3.
  EXPECT_EQ(crc16("123456789"), 0x31C3);
  EXPECT_EQ(crc16(""), 0);
}

TEST(ClusterKeySlotTest, KnownSlots) {
  // Values from CLUSTER KEYSLOT on Redis 7 (the integration tests compare many more).
  EXPECT_EQ(key_slot("foo"), 12182);
  EXPECT_EQ(key_slot("bar"), 5061);
  EXPECT_EQ(key_slot("123456789"), 0x31C3);
  EXPECT_EQ(key_slot(""), 0);
}

TEST(ClusterKeySlotTest, HashTagRules) {
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
  // The first '{' and the next '}': "foo{bar}{zap}" hashes "bar".
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  // An empty tag hashes the whole key.
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");
  // "{{bar}}" hashes "{bar" (the tag runs from the first '{' to the first '}').
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  // No closing brace: the whole key.
  EXPECT_EQ(hash_tag("foo{bar"), "foo{bar");
  EXPECT_EQ(hash_tag("plain"), "plain");
  // A prefix before the tag does not matter: Sluice's "sluice:" prefix keeps tags working.
  EXPECT_EQ(key_slot("sluice:{tenant7}:login"), key_slot("sluice:{tenant7}:api"));
}

TEST(ClusterKeySlotTest, SlotsStayInRangeAndBinaryKeysWork) {
  std::string key = "k";
  for (int i = 0; i < 1000; ++i) {
    key.push_back(static_cast<char>(i));
    EXPECT_LT(key_slot(key), slot_count);
  }
  EXPECT_EQ(key_slot(std::string("a\0b", 3)), crc16(std::string("a\0b", 3)) & 16383);
}

}  // namespace
}  // namespace sluice::redis::cluster
