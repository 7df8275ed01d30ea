// The slot map built from CLUSTER SLOTS replies (fed as raw RESP through hiredis's reader).
#include <gtest/gtest.h>

#include <string>

#include "redis/cluster/slot_map.hpp"
#include "redis/resp.hpp"

namespace sluice::redis::cluster {
namespace {

reply_ptr parse_resp(const std::string& bytes) {
  reply_reader reader;
  EXPECT_TRUE(reader.feed(bytes.data(), bytes.size()));
  reply_ptr out;
  EXPECT_EQ(reader.next(out), reply_reader::status::reply);
  return out;
}

std::string bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}
std::string integer(long long v) { return ":" + std::to_string(v) + "\r\n"; }
std::string node(const std::string& host, int port, const std::string& id) {
  return "*3\r\n" + bulk(host) + integer(port) + bulk(id);
}

// Three masters with one replica each, as `redis-cli --cluster create` lays them out,
// listed out of order to show the map sorts them.
std::string three_masters() {
  return "*3\r\n"
         "*4\r\n" +
         integer(5461) + integer(10922) + node("127.0.0.1", 7001, "b") +
         node("127.0.0.1", 7004, "e") + "*4\r\n" + integer(0) + integer(5460) +
         node("127.0.0.1", 7000, "a") + node("127.0.0.1", 7003, "d") + "*4\r\n" + integer(10923) +
         integer(16383) + node("127.0.0.1", 7002, "c") + node("127.0.0.1", 7005, "f");
}

TEST(ClusterSlotMapTest, ParsesClusterSlots) {
  auto reply = parse_resp(three_masters());
  std::string why;
  auto map = parse_cluster_slots(*reply, "127.0.0.1", &why);
  ASSERT_TRUE(map) << why;
  ASSERT_EQ(map->ranges().size(), 3u);
  EXPECT_EQ(map->ranges()[0].first, 0);
  EXPECT_EQ(map->ranges()[2].last, 16383);
  EXPECT_TRUE(map->covers_all_slots());
  EXPECT_EQ(*map->master_of(0), (node_address{"127.0.0.1", 7000}));
  EXPECT_EQ(*map->master_of(5460), (node_address{"127.0.0.1", 7000}));
  EXPECT_EQ(*map->master_of(5461), (node_address{"127.0.0.1", 7001}));
  EXPECT_EQ(*map->master_of(10923), (node_address{"127.0.0.1", 7002}));
  EXPECT_EQ(*map->master_of(16383), (node_address{"127.0.0.1", 7002}));
  EXPECT_EQ(map->masters().size(), 3u);
  EXPECT_EQ(map->nodes().size(), 6u);
  ASSERT_EQ(map->ranges()[0].replicas.size(), 1u);
  EXPECT_EQ(map->ranges()[0].replicas[0], (node_address{"127.0.0.1", 7003}));
}

TEST(ClusterSlotMapTest, SingleSlotRangesAndGaps) {
  // A migrated slot shows up as its own one-slot range; uncovered slots have no master.
  auto reply = parse_resp("*2\r\n*3\r\n" + integer(0) + integer(99) + node("h1", 1, "a") +
                          "*3\r\n" + integer(100) + integer(100) + node("h2", 2, "b"));
  auto map = parse_cluster_slots(*reply, "h1");
  ASSERT_TRUE(map);
  EXPECT_EQ(map->master_of(99)->port, 1);
  EXPECT_EQ(map->master_of(100)->port, 2);
  EXPECT_EQ(map->master_of(101), nullptr);
  EXPECT_FALSE(map->covers_all_slots());
}

TEST(ClusterSlotMapTest, EmptyHostMeansTheNodeAskedAndQuestionMarkIsLeftOut) {
  auto reply = parse_resp("*2\r\n*3\r\n" + integer(0) + integer(8191) + node("", 7000, "a") +
                          "*3\r\n" + integer(8192) + integer(16383) + node("?", 7001, "b"));
  auto map = parse_cluster_slots(*reply, "127.0.0.9");
  ASSERT_TRUE(map);
  EXPECT_EQ(*map->master_of(0), (node_address{"127.0.0.9", 7000}));
  EXPECT_EQ(map->master_of(9000), nullptr);
}

TEST(ClusterSlotMapTest, RejectsMalformedReplies) {
  std::string why;
  EXPECT_FALSE(parse_cluster_slots(
      *parse_resp("-ERR This instance has cluster support disabled\r\n"), "h", &why));
  EXPECT_NE(why.find("cluster support disabled"), std::string::npos);
  EXPECT_FALSE(parse_cluster_slots(*parse_resp(":1\r\n"), "h"));
  // Inverted range, beyond the last slot, overlap, missing master, bad port.
  EXPECT_FALSE(parse_cluster_slots(
      *parse_resp("*1\r\n*3\r\n" + integer(10) + integer(5) + node("h", 1, "a")), "h"));
  EXPECT_FALSE(parse_cluster_slots(
      *parse_resp("*1\r\n*3\r\n" + integer(0) + integer(16384) + node("h", 1, "a")), "h"));
  EXPECT_FALSE(parse_cluster_slots(
      *parse_resp("*2\r\n*3\r\n" + integer(0) + integer(10) + node("h", 1, "a") + "*3\r\n" +
                  integer(10) + integer(20) + node("h", 2, "b")),
      "h", &why));
  EXPECT_NE(why.find("overlap"), std::string::npos);
  EXPECT_FALSE(parse_cluster_slots(*parse_resp("*1\r\n*2\r\n" + integer(0) + integer(1)), "h"));
  EXPECT_FALSE(parse_cluster_slots(
      *parse_resp("*1\r\n*3\r\n" + integer(0) + integer(1) + node("h", 70000, "a")), "h"));
}

TEST(ClusterSlotMapTest, EmptyMap) {
  auto map = parse_cluster_slots(*parse_resp("*0\r\n"), "h");
  ASSERT_TRUE(map);
  EXPECT_TRUE(map->empty());
  EXPECT_EQ(map->master_of(0), nullptr);
  EXPECT_FALSE(map->covers_all_slots());
}

}  // namespace
}  // namespace sluice::redis::cluster
